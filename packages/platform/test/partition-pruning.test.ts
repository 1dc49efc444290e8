import { randomUUID } from 'node:crypto';
import { createDb, createPool, ensurePartitions, insertEvents, markSent, partitionRange, recordAttempts, type Db } from '../src';
import { createTestDatabase, type TestDatabase } from '../../../test/support/test-database';

const DAY_MS = 86_400_000;

describe('partitionRange', () => {
  it('spans the keys, widened by a second each side, and is unbounded when any key is unknown', () => {
    expect(partitionRange(['2026-12-02T10:00:00.000Z', '2026-12-02T09:00:00.500Z'])).toEqual({ from: '2026-12-02T08:59:59.500Z', to: '2026-12-02T10:00:01.000Z' });
    expect(partitionRange([new Date('2026-12-02T10:00:00.000Z')])).toEqual({ from: '2026-12-02T09:59:59.000Z', to: '2026-12-02T10:00:01.000Z' });
    // A job queued before jobs carried their row's key: every day.
    expect(partitionRange(['2026-12-02T10:00:00.000Z', undefined])).toEqual({ from: '-infinity', to: 'infinity' });
    expect(partitionRange([null])).toEqual({ from: '-infinity', to: 'infinity' });
    expect(partitionRange(['not a time'])).toEqual({ from: '-infinity', to: 'infinity' });
    expect(partitionRange([])).toEqual({ from: '-infinity', to: 'infinity' });
  });
});

/**
 * The pipeline's statements that find rows by id name the rows' days (jobs carry their rows'
 * partition keys), so on a month of day partitions their plans touch one: before, each id was an
 * index probe of every day (docs/decisions/0009). Caused on a real Postgres with 38 days, on the
 * generic plans the services run (planned once per connection, pruned as each run starts).
 */
describe('statements by id on a month of day partitions', () => {
  let database: TestDatabase;
  let pool: ReturnType<typeof createPool>;
  let db: Db;

  beforeAll(async () => {
    database = await createTestDatabase();
    // One connection, so the prepared statements explained are the ones the calls made.
    pool = createPool({ connectionString: database.url, max: 1, genericPlans: true });
    db = createDb(pool);
    // A month back, as RETENTION_DAYS keeps: every 7 days' upkeep makes the 8 days from there.
    for (let back = 35; back > 0; back -= 7) await ensurePartitions(db, ['outbox', 'entregas', 'entrega_intentos'], new Date(Date.now() - back * DAY_MS));
  }, 60_000);
  afterAll(async () => {
    await pool?.end();
    await database?.drop();
  });

  // The partitions a plan reads (its scans; an update lists every result relation, pruned or not).
  const partitionsIn = (plan: string, table: string) => new Set(plan.match(new RegExp(`Scan (?:using \\S+ )?on ${table}_(?:p\\d{8}|default)\\b`, 'g')) ?? []).size;

  it("an event's job carries its row's key, to the millisecond, and marking it relayed finds it by that day", async () => {
    const days = (await pool.query<{ n: number }>(`select count(*)::int n from pg_inherits where inhparent = 'outbox'::regclass`)).rows[0]!.n;
    expect(days).toBeGreaterThanOrEqual(36);
    const empresaId = (await pool.query<{ id: string }>(`insert into empresas (nombre, verificada) values ('pruning', true) returning id`)).rows[0]!.id;
    const eventId = randomUUID();
    const [job] = await db.transaction().execute((trx) =>
      insertEvents(trx, [
        { eventId, evento: 'GUIA_CREADA', empresaId, sucursalId: null, data: { numeroGuia: 'P1', estado: 'CREADA' }, requestId: null, sequence: 1, mode: 'live' },
      ]),
    );
    const row = (await pool.query<{ created_at: Date; us: string }>(`select created_at, extract(microseconds from created_at)::text us from outbox where id = $1`, [eventId])).rows[0]!;
    expect(job?.partitionAt).toBe(row.created_at.toISOString());

    await markSent(db, [{ eventId, partitionAt: job!.partitionAt }]);
    expect((await pool.query(`select 1 from outbox where id = $1 and enviado_en is not null`, [eventId])).rowCount).toBe(1);
  });

  it("recording attempts names the deliveries' days: the kept plan prunes every other day as it starts", async () => {
    const empresaId = (await pool.query<{ id: string }>(`insert into empresas (nombre, verificada) values ('pruning 2', true) returning id`)).rows[0]!.id;
    const webhookId = (
      await pool.query<{ id: string }>(`insert into webhooks (empresa_id, url, secret, eventos) values ($1, 'https://receiver.test/hook', 'whsec_x', '{}') returning id`, [empresaId])
    ).rows[0]!.id;
    const delivery = (
      await pool.query<{ id: string; particion_en: Date }>(
        `insert into entregas (id, webhook_id, evento_id, evento, numero_guia, estado, exitoso, intentos, proximo_intento_en)
         values (gen_random_uuid(), $1, gen_random_uuid(), 'GUIA_CREADA', 'P2', 'pendiente', false, 1, now()) returning id, particion_en`,
        [webhookId],
      )
    ).rows[0]!;
    const attempt = (partitionAt: string | undefined) => ({
      deliveryId: delivery.id,
      attempt: 2,
      at: new Date(),
      statusCode: 200,
      durationMs: 3,
      error: null,
      message: null,
      response: null,
      state: 'exitosa' as const,
      nextAt: null,
      partitionAt,
    });
    const changed = await recordAttempts(db, [attempt(delivery.particion_en.toISOString())]);
    expect([...changed]).toEqual([delivery.id]);
    expect((await pool.query(`select estado, intentos from entregas where id = $1`, [delivery.id])).rows).toEqual([{ estado: 'exitosa', intentos: 2 }]);
    expect((await pool.query(`select numero from entrega_intentos where entrega_id = $1`, [delivery.id])).rows).toEqual([{ numero: 2 }]);

    // The very statement kept, explained with a day, then with none (a job from before).
    const explain = async (from: string, to: string) =>
      (
        await pool.query<{ 'QUERY PLAN': string }>(
          `explain (costs off) execute record_attempts('{${delivery.id}}', '{3}', '{200}', '{${new Date().toISOString()}}', '{exitosa}', '{NULL}', '${from}', '${to}',
             '{${delivery.id}}', '{3}', '{${new Date().toISOString()}}', '{200}', '{3}', '{NULL}', '{NULL}', '{NULL}')`,
        )
      ).rows
        .map((r) => r['QUERY PLAN'])
        .join('\n');
    const { from, to } = partitionRange([delivery.particion_en]);
    const pruned = await explain(from, to);
    const everyDay = await explain('-infinity', 'infinity');
    expect(pruned).toMatch(/Subplans Removed: \d+/);
    expect(partitionsIn(pruned, 'entregas')).toBeLessThanOrEqual(2);
    expect(partitionsIn(everyDay, 'entregas')).toBeGreaterThanOrEqual(36);
  });
});
