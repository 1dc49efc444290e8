import pg from 'pg';
import { WEBHOOK_VERSIONED_COLUMNS } from '../src';
import { createTestDatabase, type TestDatabase } from '../../../test/support/test-database';

/**
 * The `webhook_versions` trigger lists by hand the columns that route or sign a webhook; the
 * dispatcher serves routes it holds until that count moves. A routing or signing column the trigger
 * misses would leave stale routes served, so its list must be WEBHOOK_VERSIONED_COLUMNS exactly.
 */
describe('the webhook_versions trigger', () => {
  let database: TestDatabase;
  let client: pg.Client;

  beforeAll(async () => {
    database = await createTestDatabase();
    client = new pg.Client({ connectionString: database.url });
    await client.connect();
  });
  afterAll(async () => {
    await client?.end();
    await database?.drop();
  });

  it('fires on an insert and on an update of exactly the declared routing and signing columns', async () => {
    const trigger = await client.query<{ definition: string; columns: string[] }>(
      `select pg_get_triggerdef(t.oid) as definition,
              array(select a.attname::text from unnest(t.tgattr::int2[]) as c(attnum)
                    join pg_attribute a on a.attrelid = t.tgrelid and a.attnum = c.attnum order by 1) as columns
       from pg_trigger t
       where t.tgrelid = 'webhooks'::regclass and t.tgname = 'webhooks_version_trg'`,
    );
    expect(trigger.rows).toHaveLength(1);
    const { definition, columns } = trigger.rows[0]!;
    expect(columns).toEqual([...WEBHOOK_VERSIONED_COLUMNS].sort());
    expect(definition).toMatch(/AFTER INSERT OR UPDATE OF .* ON public\.webhooks FOR EACH ROW EXECUTE FUNCTION webhooks_bump_version\(\)/);
  });

  it('counts a change of each declared column, and not of the description', async () => {
    const empresaId = (await client.query<{ id: string }>(`insert into empresas (nombre, verificada) values ('versions', true) returning id`)).rows[0]!.id;
    const webhookId = (
      await client.query<{ id: string }>(`insert into webhooks (empresa_id, url, secret, eventos) values ($1, 'https://receiver.test/hook', 'whsec_x', '{}') returning id`, [empresaId])
    ).rows[0]!.id;
    const version = async (): Promise<number> =>
      Number((await client.query<{ version: string }>('select version from webhook_versions where empresa_id = $1', [empresaId])).rows[0]!.version);

    expect(await version()).toBe(1);
    let expected = 1;
    for (const column of WEBHOOK_VERSIONED_COLUMNS) {
      // An update of the column fires the trigger whether or not its value changes.
      await client.query(`update webhooks set ${pg.escapeIdentifier(column)} = ${pg.escapeIdentifier(column)} where id = $1`, [webhookId]);
      expect({ column, version: await version() }).toEqual({ column, version: ++expected });
    }
    await client.query(`update webhooks set descripcion = 'edited' where id = $1`, [webhookId]);
    expect(await version()).toBe(expected);
  });
});
