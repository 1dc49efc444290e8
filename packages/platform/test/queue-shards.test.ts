import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import { shardOf, MAX_QUEUE_SHARDS } from '@svc/contracts';
import { sql } from 'kysely';
import { checkQueueShards, createDb, createPool, loadSettings, parseShardList, queueShardPrefixes, recordedQueueShards, setQueueShards, shardTag } from '@svc/platform';
import { up as queueShardsMigration } from '../src/db/migrations/20261202080000_queue_shards';
import { createTestDatabase, type TestDatabase } from '../../../test/support/test-database';

// ioredis's own slot function: the one its cluster client routes every key by.
const keySlot = createRequire(require.resolve('ioredis'))('cluster-key-slot') as (key: string) => number;

/** The slot ranges `redis-cli --cluster create` gives `masters` masters (its cluster_manager split). */
function defaultSplit(masters: number): Array<[number, number]> {
  const ranges: Array<[number, number]> = [];
  const per = 16384 / masters;
  let first = 0;
  let cursor = 0;
  for (let i = 0; i < masters; i++) {
    let last = Math.round(cursor + per - 1);
    if (last > 16384 || i === masters - 1) last = 16383;
    ranges.push([first, last]);
    first = last + 1;
    cursor += per;
  }
  return ranges;
}
const masterOf = (slot: number, split: Array<[number, number]>): number => split.findIndex(([a, b]) => slot >= a && slot <= b);

describe('the shard of a company', () => {
  it('is stable: the same id gives the same shard in every process, whatever its case', () => {
    // Fixed vectors: the function is stored data in effect (jobs wait on the shard it named), so a
    // change to it must fail here, not strand work after an upgrade.
    const vectors: Array<[string, number]> = [
      ['6f1c1a3e-2b7d-4a52-9e1f-0c9d8b7a6f51', 6],
      ['c0ffee00-1234-4abc-8def-0123456789ab', 6],
      ['11111111-2222-4333-8444-555555555555', 6],
    ];
    // FNV-1a 32 of the lowercase id, modulo the shards, computed here independently of shardOf.
    const fnv = (s: string): number => {
      let h = 0x811c9dc5;
      for (const c of Buffer.from(s.toLowerCase(), 'latin1')) h = Math.imul(h ^ c, 0x01000193) >>> 0;
      return h;
    };
    for (const [id, n] of vectors) {
      expect(shardOf(id, n)).toBe(fnv(id) % n);
      expect(shardOf(id.toUpperCase(), n)).toBe(shardOf(id, n));
    }
  });

  it('is 0 with one shard, and for a job without a company (queued before shards existed)', () => {
    expect(shardOf(randomUUID(), 1)).toBe(0);
    expect(shardOf(undefined, 6)).toBe(0);
  });

  it('spreads companies evenly: 12000 random ids over 6 shards, each within 10% of its share', () => {
    const counts = Array.from({ length: 6 }, () => 0);
    for (let i = 0; i < 12_000; i++) counts[shardOf(randomUUID(), 6)]!++;
    for (const n of counts) expect(Math.abs(n - 2000)).toBeLessThan(200);
  });
});

describe('the queue shards’ keys', () => {
  const layout = (queueShards: number, cluster = false) => ({ redisPrefix: cluster ? '{svc}' : 'svc', redisNamespace: 'svc', queueShards });

  it('one shard keeps the names the queues had before shards (stored data), on one Redis and on a cluster', () => {
    expect(queueShardPrefixes(layout(1))).toEqual(['svc']);
    expect(queueShardPrefixes(layout(1, true))).toEqual(['{svc}']);
  });

  it('6 shards: each its own hash tag, 2 on each master of the default 3-master split', () => {
    const prefixes = queueShardPrefixes(layout(6, true));
    expect(prefixes).toEqual(queueShardPrefixes(layout(6)));
    const slots = prefixes.map((p) => keySlot(`${p}:shipment-events:wait`));
    // A shard's two queues share its slot (a script or MULTI over both stays in one).
    prefixes.forEach((p, k) => expect(keySlot(`${p}:webhook-deliveries:wait`)).toBe(slots[k]));
    expect(new Set(slots).size).toBe(6);
    const split = defaultSplit(3);
    expect(split).toEqual([
      [0, 5460],
      [5461, 10922],
      [10923, 16383],
    ]);
    const perMaster = [0, 1, 2].map((m) => slots.filter((s) => masterOf(s, split) === m).length);
    expect(perMaster).toEqual([2, 2, 2]);
  });

  it.each([2, 3, 4, 6, 9, 12])('%i shards spread as evenly as they can over 3 masters (and 2 masters when even)', (n) => {
    const slotsOf = (masters: number) => {
      const split = defaultSplit(masters);
      const per = Array.from({ length: masters }, () => 0);
      for (let k = 0; k < n; k++) per[masterOf(keySlot(`{${shardTag(k, n)}}`), split)]!++;
      return per;
    };
    const three = slotsOf(3);
    expect(Math.max(...three) - Math.min(...three)).toBeLessThanOrEqual(1);
    if (n % 2 === 0) expect(slotsOf(2)).toEqual([n / 2, n / 2]);
  });

  it('finds a tag for every shard count up to the most', () => {
    const tags = new Set(Array.from({ length: MAX_QUEUE_SHARDS }, (_, k) => shardTag(k, MAX_QUEUE_SHARDS)));
    expect(tags.size).toBe(MAX_QUEUE_SHARDS);
  });
});

describe("the stack's QUEUE_SHARDS, recorded in Postgres", () => {
  let database: TestDatabase;
  let db: ReturnType<typeof createDb>;
  beforeAll(async () => {
    database = await createTestDatabase();
    db = createDb(createPool({ connectionString: database.url, max: 2 }));
  });
  afterAll(async () => {
    await db?.destroy();
    await database?.drop();
  });

  it('is recorded by the first start, refuses another value naming both, and changes only on purpose', async () => {
    expect(await recordedQueueShards(db)).toBeUndefined();
    await checkQueueShards(db, 6);
    expect(await recordedQueueShards(db)).toBe(6);
    await checkQueueShards(db, 6);
    await expect(checkQueueShards(db, 1)).rejects.toThrow(/QUEUE_SHARDS=1, but this stack's queues are split into 6 shards/);
    expect(await recordedQueueShards(db)).toBe(6);
    expect(await setQueueShards(db, 3)).toBe(6);
    await checkQueueShards(db, 3);
    await expect(checkQueueShards(db, 6)).rejects.toThrow(/QUEUE_SHARDS=6, but this stack's queues are split into 3 shards/);
  });

  it('the migration records 1 for a stack that ran before shards existed (it has a company), nothing for a new one', async () => {
    await sql`drop table ajustes_pila`.execute(db);
    await queueShardsMigration(db);
    expect(await recordedQueueShards(db)).toBeUndefined();
    await sql`drop table ajustes_pila`.execute(db);
    await sql`insert into empresas (nombre) values ('antes de los shards')`.execute(db);
    await queueShardsMigration(db);
    expect(await recordedQueueShards(db)).toBe(1);
    await expect(checkQueueShards(db, 6)).rejects.toThrow(/QUEUE_SHARDS=6, but this stack's queues are split into 1 shards/);
  });
});

describe('DISPATCHER_SHARDS as a list', () => {
  it('reads lists and ranges of shards, every shard when unset', () => {
    expect(parseShardList('0-3,7', 8)).toEqual([0, 1, 2, 3, 7]);
    expect(parseShardList(' 5 , 1-2,2 ', 6)).toEqual([1, 2, 5]);
    expect(parseShardList(undefined, 3)).toEqual([0, 1, 2]);
  });
});

it('QUEUE_SHARDS defaults to 1', () => {
  expect(loadSettings('svc', {}, () => ({})).queueShards).toBe(1);
});
