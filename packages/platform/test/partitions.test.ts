import { createDb, createPool, dayOf, dropDaysEndedBefore, ensurePartitions, listDayPartitions, partitionName, PARTITIONS_AHEAD_DAYS, type Db } from '../src';
import { createTestDatabase, type TestDatabase } from '../../../test/support/test-database';

const DAY_MS = 86_400_000;

/**
 * The partition upkeep on a real Postgres (db/partitions.ts): partitions made ahead, by any number
 * of processes at once; a row of a day without a partition kept by the DEFAULT partition and moved
 * into its day once that is made; and a DDL that cannot have its locks gives up instead of
 * stalling the table.
 */
describe('day partitions', () => {
  let database: TestDatabase;
  let pools: Array<ReturnType<typeof createPool>>;
  let dbs: Db[];

  beforeAll(async () => {
    database = await createTestDatabase();
    pools = [createPool({ connectionString: database.url, max: 2 }), createPool({ connectionString: database.url, max: 2 })];
    dbs = pools.map((p) => createDb(p));
  });
  afterAll(async () => {
    await Promise.all(pools.map((p) => p.end()));
    await database?.drop();
  });

  it('two processes making the same partitions at once make each once', async () => {
    const ahead = new Date(Date.now() + 60 * DAY_MS);
    const [a, b] = await Promise.all(dbs.map((db) => ensurePartitions(db, ['outbox', 'entregas', 'entrega_intentos'], ahead)));
    const made = [...a!, ...b!];
    expect(made).toHaveLength(3 * (PARTITIONS_AHEAD_DAYS + 1));
    expect(new Set(made).size).toBe(made.length);
    const days = (await listDayPartitions(dbs[0]!, 'entregas')).map((p) => p.name);
    for (let i = 0; i <= PARTITIONS_AHEAD_DAYS; i++) expect(days).toContain(partitionName('entregas', dayOf(new Date(ahead.getTime() + i * DAY_MS))));
    // Again: nothing left to make.
    expect(await ensurePartitions(dbs[1]!, ['outbox', 'entregas', 'entrega_intentos'], ahead)).toEqual([]);
  });

  it('a row of a day with no partition (a clock far ahead) is written to the DEFAULT partition, then moved into its day', async () => {
    const [pool] = pools;
    await pool!.query(`insert into idempotencia (scope, clave, request_hash, created_at) values ('t:r', 'far', 'h', now() + interval '400 days')`);
    expect((await pool!.query('select clave from idempotencia_default')).rows).toEqual([{ clave: 'far' }]);
    const made = await ensurePartitions(dbs[0]!, ['idempotencia']);
    const far = partitionName('idempotencia', dayOf(new Date(Date.now() + 400 * DAY_MS)));
    expect(made).toContain(far);
    expect((await pool!.query('select count(*)::int n from idempotencia_default')).rows).toEqual([{ n: 0 }]);
    expect((await pool!.query(`select clave, tableoid::regclass::text t from idempotencia where clave = 'far'`)).rows).toEqual([{ clave: 'far', t: far }]);
  });

  it('gives up on a table whose locks it cannot have within the lock timeout, and makes or drops its partitions once they are free', async () => {
    const ahead = new Date(Date.now() + 200 * DAY_MS);
    const back = new Date(Date.now() - 100 * DAY_MS);
    await ensurePartitions(dbs[0]!, ['actividad'], back);
    const old = partitionName('actividad', dayOf(back));
    const names = async () => (await listDayPartitions(dbs[0]!, 'actividad')).map((p) => p.name);
    expect(await names()).toContain(old);
    const holder = await pools[1]!.connect();
    try {
      // A transaction still open on `actividad` (every partition read): an attach or a drop must wait for it.
      await holder.query('begin');
      await holder.query('select count(*) from actividad');
      const started = Date.now();
      expect(await ensurePartitions(dbs[0]!, ['actividad'], ahead)).toEqual([]);
      expect(await dropDaysEndedBefore(dbs[0]!, 'actividad', new Date(Date.now() - 50 * DAY_MS))).toBe(0);
      // Half a second per try: the table waited behind them no longer than that each time.
      expect(Date.now() - started).toBeLessThan(10_000);
      expect(await names()).toContain(old);
      expect(await names()).not.toContain(partitionName('actividad', dayOf(ahead)));
      await holder.query('commit');
    } finally {
      await holder.query('rollback').catch(() => undefined);
      holder.release();
    }
    expect(await ensurePartitions(dbs[0]!, ['actividad'], ahead)).toHaveLength(PARTITIONS_AHEAD_DAYS + 1);
    expect(await dropDaysEndedBefore(dbs[0]!, 'actividad', new Date(Date.now() - 50 * DAY_MS))).toBe(0);
    expect(await names()).not.toContain(old);
  }, 30_000);
});
