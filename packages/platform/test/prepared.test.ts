import { sql } from 'kysely';
import { createDb, createPool, prepared, type Db } from '../src';
import { createTestDatabase, type TestDatabase } from '../../../test/support/test-database';

describe('prepared statements', () => {
  let database: TestDatabase;
  const pools: ReturnType<typeof createPool>[] = [];
  const open = (genericPlans: boolean): { pool: ReturnType<typeof createPool>; db: Db } => {
    const pool = createPool({ connectionString: database.url, max: 1, genericPlans });
    pools.push(pool);
    return { pool, db: createDb(pool) };
  };

  beforeAll(async () => {
    database = await createTestDatabase();
  });
  afterAll(async () => {
    for (const p of pools) await p.end();
    await database?.drop();
  });

  it('run as named statements, planned once per connection with genericPlans', async () => {
    const { pool, db } = open(true);
    expect((await pool.query<{ plan_cache_mode: string }>('show plan_cache_mode')).rows[0]!.plan_cache_mode).toBe('force_generic_plan');
    const query = (ids: string[]) => sql<{ n: number }>`select cardinality(${sql.val(ids)}::text[]) as n`;
    for (const ids of [['a'], ['a', 'b', 'c']]) {
      const result = await db.executeQuery<{ n: number }>(prepared('probe_count', query(ids), db));
      expect(result.rows).toEqual([{ n: ids.length }]);
    }
    const statements = await pool.query<{ name: string; generic_plans: string; custom_plans: string }>(
      `select name, generic_plans, custom_plans from pg_prepared_statements where name = 'probe_count'`,
    );
    expect(statements.rows).toEqual([{ name: 'probe_count', generic_plans: '2', custom_plans: '0' }]);
  });

  it("keep Postgres's default without it", async () => {
    const { pool } = open(false);
    expect((await pool.query<{ plan_cache_mode: string }>('show plan_cache_mode')).rows[0]!.plan_cache_mode).toBe('auto');
  });

  it('refuse a second text under one name', async () => {
    const { db } = open(false);
    prepared('probe_text', sql`select 1`, db);
    expect(() => prepared('probe_text', sql`select 2`, db)).toThrow('prepared statement probe_text: its text changed');
  });
});
