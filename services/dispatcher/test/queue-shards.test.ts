import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { JOBS, shardOf } from '@svc/contracts';
import { queueShardPrefixes, shardedQueueFor, type ShardedQueue } from '@svc/platform';
import { loadDispatcherConfig } from '../src/config';
import { TEST_REDIS_URL } from '../../../test/support/env';
import { eventually, sleep } from '../../../test/support/eventually';
import { count, createBatch, guia, moveOn } from '../../../test/support/shipment-fixtures';
import { startTestDispatcher, startDispatcherFixture, type DispatcherFixture } from '../../../test/support/test-dispatcher';
import { bearer, createCompany, startTestGateway, type Company, type TestGateway } from '../../../test/support/test-gateway';

const ROOT = resolve(__dirname, '../../..');

describe('QUEUE_SHARDS and DISPATCHER_SHARDS as settings', () => {
  const refusal = (env: Record<string, string>): string => {
    try {
      loadDispatcherConfig(env);
      return '';
    } catch (err) {
      return (err as Error).message;
    }
  };

  it('a dispatcher consumes every shard by default, or the ones DISPATCHER_SHARDS names', () => {
    expect(loadDispatcherConfig({}).consumedShards).toEqual([0]);
    expect(loadDispatcherConfig({ QUEUE_SHARDS: '6' }).consumedShards).toEqual([0, 1, 2, 3, 4, 5]);
    expect(loadDispatcherConfig({ QUEUE_SHARDS: '8', DISPATCHER_SHARDS: '0-3,7' }).consumedShards).toEqual([0, 1, 2, 3, 7]);
  });

  it.each([
    ['a shard past QUEUE_SHARDS', '0,6', /DISPATCHER_SHARDS: "6" names shard 6, but QUEUE_SHARDS=6 has shards 0 to 5/],
    ['a backwards range', '3-1', /DISPATCHER_SHARDS: "3-1" is a range that ends before it starts/],
    ['a word', 'all', /DISPATCHER_SHARDS: "all" is not a shard number or a range like 0-3/],
    ['an empty item', '1,,2', /DISPATCHER_SHARDS: "" is not a shard number/],
  ])('refuses %s at start, saying why', (_name, value, message) => {
    expect(refusal({ QUEUE_SHARDS: '6', DISPATCHER_SHARDS: value })).toMatch(message);
  });

  it.each(['0', '65', 'six'])('refuses QUEUE_SHARDS=%s', (value) => {
    expect(refusal({ QUEUE_SHARDS: value })).toMatch(new RegExp(`QUEUE_SHARDS="${value}" must be an integer from 1 to 64`));
  });
});

/** Companies made until every one of `shards` shards has at least `each` of them. */
async function companiesOnEveryShard(gw: TestGateway, shards: number, each = 1): Promise<Company[]> {
  const made: Company[] = [];
  const per = Array.from({ length: shards }, () => 0);
  while (per.some((n) => n < each)) {
    const c = await createCompany(gw, { planActivo: true, creditos: 1000 });
    const k = shardOf(c.id, shards);
    if (per[k]! >= each) continue;
    per[k]!++;
    made.push(c);
  }
  return made;
}

async function hook(gw: TestGateway, c: Company, url: string): Promise<void> {
  const res = await gw.http.post('/api/v1/webhooks').set('Authorization', bearer(c.live)).send({ url });
  expect(res.status).toBe(201);
}

async function ship(gw: TestGateway, c: Company, n: number): Promise<string[]> {
  const res = await createBatch(gw, c.live, Array.from({ length: n }, (_, i) => guia(i)));
  expect(res.status).toBe(201);
  return (res.body as { data: { guias: Array<{ numeroGuia: string }> } }).data.guias.map((g) => g.numeroGuia);
}

/** The test's view of the stack's queues: every shard's, as the services name them. */
function queuesOf(fx: DispatcherFixture, redis: Redis, queueShards: number) {
  const layout = { redisPrefix: fx.prefix, redisNamespace: fx.prefix, queueShards };
  return {
    events: shardedQueueFor(JOBS.shipmentEvent, { connection: redis, layout }),
    deliveries: shardedQueueFor(JOBS.delivery, { connection: redis, layout }),
  };
}

/** The shards whose queue holds job `id` (in any state). */
async function shardsHolding<P>(queue: ShardedQueue<P>, id: string): Promise<number[]> {
  const found = await Promise.all(queue.shards.map(async (q, k) => ((await q.getJob(id)) ? k : -1)));
  return found.filter((k) => k >= 0);
}

describe('queue shards on one Redis (QUEUE_SHARDS=3)', () => {
  const SHARDS = { QUEUE_SHARDS: '3' };
  let fx: DispatcherFixture;
  let redis: Redis;
  let queues: ReturnType<typeof queuesOf>;
  beforeAll(async () => {
    fx = await startDispatcherFixture('shards', { gateway: { env: SHARDS }, dispatcher: { env: SHARDS } });
    redis = new Redis(TEST_REDIS_URL);
    queues = queuesOf(fx, redis, 3);
  });
  afterAll(async () => {
    await queues?.events.close();
    await queues?.deliveries.close();
    redis?.disconnect();
    await fx?.stop();
  });

  it("puts each company's events and deliveries, retries included, on its own shard, and each shipment's events arrive whole, in sequence", async () => {
    const companies = await companiesOnEveryShard(fx.gw, 3, 2);
    for (const [i, c] of companies.entries()) await hook(fx.gw, c, fx.receiver.url(`/c${i}`));
    // One company's first attempts fail once: its retries go through the delivery queue.
    fx.receiver.respond('/c0', [{ status: 500 }, { status: 500 }, { status: 500 }, { status: 200 }]);
    const shipments = new Map<string, number>();
    for (const [i, c] of companies.entries()) for (const n of await ship(fx.gw, c, 3)) shipments.set(n, i);
    for (const n of shipments.keys()) expect((await moveOn(fx.gw, n, { evento: 'GUIA_RECOLECTADA' })).status).toBe(200);
    for (const n of shipments.keys()) expect((await moveOn(fx.gw, n, { evento: 'GUIA_EN_BODEGA' })).status).toBe(200);
    const expected = shipments.size * 3;
    await eventually(async () => (await count(fx.pool, `select count(*) n from entregas where estado = 'exitosa'`)) === expected, 20_000, 'every delivery made');

    // Per shipment: its three events, each received (a retry repeats one), in its history's order.
    for (const [numero, i] of shipments) {
      const got = fx.receiver
        .requestsTo(`/c${i}`)
        .map((r) => JSON.parse(r.rawBody.toString('utf8')) as { event: string; data: { numeroGuia: string } })
        .filter((b) => b.data.numeroGuia === numero);
      expect(new Set(got.map((b) => b.event))).toEqual(new Set(['GUIA_CREADA', 'GUIA_RECOLECTADA', 'GUIA_EN_BODEGA']));
    }
    const sequences = await fx.pool.query<{ empresa_id: string; numero: string; seqs: number[] }>(
      `select o.empresa_id, o.data->>'numeroGuia' numero, array_agg(o.secuencia order by o.created_at) seqs from outbox o group by 1, 2`,
    );
    for (const row of sequences.rows) expect(row.seqs).toEqual([1, 2, 3]);

    // Every event's job is on its company's shard and no other; so is every retry.
    const events = await fx.pool.query<{ id: string; empresa_id: string }>('select id, empresa_id from outbox');
    for (const e of events.rows) expect(await shardsHolding(queues.events, e.id)).toEqual([shardOf(e.empresa_id, 3)]);
    const retried = await fx.pool.query<{ id: string; empresa_id: string }>(
      'select e.id, w.empresa_id from entregas e join webhooks w on w.id = e.webhook_id where e.intentos > 1',
    );
    expect(retried.rows.length).toBeGreaterThan(0);
    for (const d of retried.rows) expect(await shardsHolding(queues.deliveries, `${d.id}.2`)).toEqual([shardOf(d.empresa_id, 3)]);
    // Each shard had work: the companies were spread on purpose.
    const perShard = await queues.events.getShardJobCounts('completed');
    for (const counts of perShard) expect(counts.completed).toBeGreaterThan(0);
    // The keys are the shards' own: none under the one-shard names.
    expect(await redis.exists(`${fx.prefix}:${JOBS.shipmentEvent.queue}:meta`)).toBe(0);
    for (const p of queueShardPrefixes({ redisPrefix: fx.prefix, redisNamespace: fx.prefix, queueShards: 3 })) {
      expect(await redis.exists(`${p}:${JOBS.shipmentEvent.queue}:meta`)).toBe(1);
    }
  }, 40_000);

  it('refuses to start a dispatcher or a gateway whose QUEUE_SHARDS differs from the stack’s, naming both', async () => {
    await expect(startTestDispatcher({ databaseUrl: fx.database.url, redisPrefix: fx.prefix, env: { QUEUE_SHARDS: '2' } })).rejects.toThrow(
      /QUEUE_SHARDS=2, but this stack's queues are split into 3 shards/,
    );
    await expect(startTestGateway({ databaseUrl: fx.database.url, redisPrefix: fx.prefix })).rejects.toThrow(/QUEUE_SHARDS=1, but this stack's queues are split into 3 shards/);
  });
});

describe('DISPATCHER_SHARDS: a dispatcher consumes only the shards it names', () => {
  const SHARDS = { QUEUE_SHARDS: '2' };
  let fx: DispatcherFixture;
  let redis: Redis;
  let queues: ReturnType<typeof queuesOf>;
  beforeAll(async () => {
    fx = await startDispatcherFixture('shard-subset', { gateway: { env: SHARDS }, dispatchers: 0 });
    redis = new Redis(TEST_REDIS_URL);
    queues = queuesOf(fx, redis, 2);
  });
  afterAll(async () => {
    await queues?.events.close();
    await queues?.deliveries.close();
    redis?.disconnect();
    await fx?.stop();
  });

  it('shard 0 only: shard 1’s events wait in its queue until a dispatcher of shard 1 starts', async () => {
    await fx.addDispatcher({ env: { ...SHARDS, DISPATCHER_SHARDS: '0' } });
    const [zero, one] = await companiesOnEveryShard(fx.gw, 2);
    await hook(fx.gw, zero!, fx.receiver.url('/zero'));
    await hook(fx.gw, one!, fx.receiver.url('/one'));
    await ship(fx.gw, one!, 5);
    await ship(fx.gw, zero!, 5);
    await fx.gw.deps.outboxRelay.drain();
    await fx.receiver.waitFor(5, 10_000, '/zero');
    await sleep(500);
    expect(fx.receiver.requestsTo('/one')).toHaveLength(0);
    const [counts0, counts1] = await queues.events.getShardJobCounts('waiting', 'completed');
    expect(counts0).toMatchObject({ waiting: 0, completed: 5 });
    expect(counts1).toMatchObject({ waiting: 5, completed: 0 });

    await fx.addDispatcher({ env: { ...SHARDS, DISPATCHER_SHARDS: '1' } });
    await fx.receiver.waitFor(5, 10_000, '/one');
    expect(fx.receiver.requestsTo('/zero')).toHaveLength(5);
  }, 30_000);
});

describe('changing QUEUE_SHARDS loses nothing', () => {
  let fx: DispatcherFixture;
  beforeAll(async () => {
    fx = await startDispatcherFixture('shard-change', { dispatchers: 0 });
  });
  afterAll(() => fx?.stop());

  it('1 → 3 without draining: the jobs under the old names are rebuilt from Postgres on the new shards, each sent once', async () => {
    const companies = await companiesOnEveryShard(fx.gw, 3);
    for (const [i, c] of companies.entries()) await hook(fx.gw, c, fx.receiver.url(`/c${i}`));
    // Work queued under QUEUE_SHARDS=1 that no dispatcher took: events, and (one delivered once and
    // failed) a retry owed.
    fx.receiver.respond('/c0', [{ status: 500 }, { status: 200 }]);
    const first = await fx.addDispatcher({ env: { DISPATCHER_CONCURRENCY: '1' } });
    await ship(fx.gw, companies[0]!, 1);
    await fx.gw.deps.outboxRelay.drain();
    await eventually(async () => (await count(fx.pool, `select count(*) n from entregas where intentos = 1 and estado = 'pendiente'`)) === 1, 10_000, 'a retry owed');
    await first.stop();
    for (const c of companies) await ship(fx.gw, c, 4);
    await fx.gw.deps.outboxRelay.drain();
    await fx.gw.stop(); // the producers stop

    // The operator's step, with the command docs/operations.md gives.
    const { stdout } = await promisify(execFile)('pnpm', ['migrate', '--queue-shards', '3'], { cwd: ROOT, env: { ...process.env, DATABASE_URL: fx.database.url } });
    expect(stdout).toMatch(/QUEUE_SHARDS recorded: 3 \(was 1\)/);

    const SHARDS = { QUEUE_SHARDS: '3' };
    const gw = await fx.addGateway({ env: SHARDS });
    await fx.addDispatcher({ env: { ...SHARDS, RECONCILE_INTERVAL_MS: '200', RECONCILE_GRACE_MS: '1000' } });
    for (const c of companies) await ship(gw, c, 2);
    const owed = 1 + companies.length * 6;
    await eventually(async () => (await count(fx.pool, `select count(*) n from entregas where estado = 'exitosa'`)) === owed, 20_000, 'everything delivered');
    // Once each: every event (one webhook per company) received, and nothing twice but the one
    // attempt answered 500.
    const ids = fx.receiver.requests.map((r) => r.headers['webhook-id']);
    expect(new Set(ids).size).toBe(owed);
    expect(ids).toHaveLength(owed + 1);
    expect(await count(fx.pool, 'select count(*) n from outbox where repartido_en is null')).toBe(0);
  }, 60_000);
});
