import { sql } from 'kysely';
import { createPool, DEFAULT_STATEMENT_TIMEOUT_MS, loadSettings, openDatabase } from '../src';
import { createTestDatabase, type TestDatabase } from '../../../test/support/test-database';

const load = (env: Record<string, string>) => loadSettings('svc', env, () => ({}));

describe('DB_STATEMENT_TIMEOUT_MS', () => {
  it('defaults to 10 s, takes 0 (none) to an hour, and refuses anything else', () => {
    expect(DEFAULT_STATEMENT_TIMEOUT_MS).toBe(10_000);
    expect(load({}).dbStatementTimeoutMs).toBe(10_000);
    expect(load({ DB_STATEMENT_TIMEOUT_MS: '2500' }).dbStatementTimeoutMs).toBe(2500);
    expect(load({ DB_STATEMENT_TIMEOUT_MS: '0' }).dbStatementTimeoutMs).toBe(0);
    for (const bad of ['x', '-1', '1.5', '3600001']) {
      expect(() => load({ DB_STATEMENT_TIMEOUT_MS: bad })).toThrow(/DB_STATEMENT_TIMEOUT_MS/);
    }
  });
});

describe("every service pool's statement_timeout", () => {
  let database: TestDatabase;
  const closes: Array<() => Promise<unknown>> = [];
  const undo = { push: (_name: string, step: () => Promise<unknown>) => void closes.push(step) };

  beforeAll(async () => {
    database = await createTestDatabase();
  });
  afterAll(async () => {
    for (const close of closes.reverse()) await close();
    await database?.drop();
  });

  it('is set on each connection of the pool openDatabase makes, and cancels a statement that runs past it', async () => {
    const settings = { ...load({ DATABASE_URL: database.url, DB_STATEMENT_TIMEOUT_MS: '300', DB_POOL_SIZE: '2' }) };
    const { pool, db } = openDatabase(settings, 'timeout-test', undo);
    // Both connections of the pool, not only the first.
    const clients = await Promise.all([pool.connect(), pool.connect()]);
    try {
      for (const client of clients) {
        expect((await client.query<{ statement_timeout: string }>('show statement_timeout')).rows[0]!.statement_timeout).toBe('300ms');
      }
    } finally {
      for (const client of clients) client.release();
    }
    await expect(sql`select pg_sleep(2)`.execute(db)).rejects.toMatchObject({ code: '57014' });
    // Inside a transaction too, and the pool goes on serving.
    await expect(db.transaction().execute((trx) => sql`select pg_sleep(2)`.execute(trx))).rejects.toMatchObject({ code: '57014' });
    expect((await sql<{ n: number }>`select 1 as n`.execute(db)).rows).toEqual([{ n: 1 }]);
  });

  it('keeps the dispatcher\'s generic plans beside it, and the default of 10 s when the setting is unset', async () => {
    const { pool } = openDatabase(load({ DATABASE_URL: database.url }), 'timeout-test', undo, { genericPlans: true });
    const row = (await pool.query<{ t: string; p: string }>(`select current_setting('statement_timeout') t, current_setting('plan_cache_mode') p`)).rows[0];
    expect(row).toEqual({ t: '10s', p: 'force_generic_plan' });
  });

  it('is none on the migrations\' pool (statementTimeoutMs 0), and the server\'s own when not given', async () => {
    const none = createPool({ connectionString: database.url, max: 1, statementTimeoutMs: 0 });
    const server = createPool({ connectionString: database.url, max: 1 });
    closes.push(() => none.end(), () => server.end());
    expect((await none.query<{ statement_timeout: string }>('show statement_timeout')).rows[0]!.statement_timeout).toBe('0');
    const reset = (await server.query<{ reset_val: string }>(`select reset_val from pg_settings where name = 'statement_timeout'`)).rows[0]!.reset_val;
    const boot = (await server.query<{ boot_val: string }>(`select boot_val from pg_settings where name = 'statement_timeout'`)).rows[0]!.boot_val;
    expect(reset).toBe(boot);
  });
});
