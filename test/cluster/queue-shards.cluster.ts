import type { Cluster } from 'ioredis';
import { JOBS, shardOf } from '@svc/contracts';
import { queueShardPrefixes } from '@svc/platform';
import { TEST_QUEUE_SHARDS } from '../support/env';
import { eventually } from '../support/eventually';
import { testRedisClient } from '../support/redis-prefix';
import { count, createBatch, guia } from '../support/shipment-fixtures';
import { startDispatcherFixture, type DispatcherFixture } from '../support/test-dispatcher';
import { bearer, createCompany, type Company } from '../support/test-gateway';

// QUEUE_SHARDS=6 on the suite's 3 masters (global-setup.ts): a company's work is on its shard, and
// the shards' keys really are on different masters, 2 shards each.
describe('queue shards over the masters of a Redis Cluster', () => {
  const shards = Number(TEST_QUEUE_SHARDS ?? '1');
  let fx: DispatcherFixture;
  let redis: Cluster;

  beforeAll(async () => {
    fx = await startDispatcherFixture('cluster-shards');
    redis = testRedisClient() as Cluster;
    await redis.ping();
  });
  afterAll(async () => {
    redis?.disconnect();
    await fx?.stop();
  });

  it('runs with 6 shards', () => {
    expect(shards).toBe(6);
    expect(fx.dispatcher.config.queueShards).toBe(6);
    expect(fx.dispatcher.config.consumedShards).toEqual([0, 1, 2, 3, 4, 5]);
  });

  it("delivers every company's events from its shard, and the shards' keys spread 2 per master", async () => {
    const companies: Company[] = [];
    const covered = new Set<number>();
    while (covered.size < shards) {
      const c = await createCompany(fx.gw, { planActivo: true, creditos: 1000 });
      if (covered.has(shardOf(c.id, shards))) continue;
      covered.add(shardOf(c.id, shards));
      companies.push(c);
      const res = await fx.gw.http.post('/api/v1/webhooks').set('Authorization', bearer(c.live)).send({ url: fx.receiver.url(`/${c.id}`) });
      expect(res.status).toBe(201);
    }
    for (const c of companies) expect((await createBatch(fx.gw, c.live, [guia(1), guia(2), guia(3)])).status).toBe(201);
    await eventually(async () => (await count(fx.pool, `select count(*) n from entregas where estado = 'exitosa'`)) === shards * 3, 20_000, 'every delivery made');

    const prefixes = queueShardPrefixes({ redisPrefix: `{${fx.prefix}}`, redisNamespace: fx.prefix, queueShards: shards });
    const masters = redis.nodes('master');
    // Where each shard's keys are: its queues' slot (CLUSTER KEYSLOT, one for both queues), and the
    // masters that hold keys in that slot.
    const holders = await Promise.all(
      prefixes.map(async (prefix) => {
        const [events, deliveries] = await Promise.all(
          [JOBS.shipmentEvent.queue, JOBS.delivery.queue].map((q) => redis.cluster('KEYSLOT', `${prefix}:${q}:meta`) as Promise<number>),
        );
        expect(deliveries).toBe(events);
        const held = await Promise.all(masters.map(async (m) => Number(await m.call('CLUSTER', 'COUNTKEYSINSLOT', String(events))) > 0));
        return held.flatMap((h, i) => (h ? [i] : []));
      }),
    );
    // Each shard's two queues on exactly one master, and each master holding two shards.
    for (const h of holders) expect(h).toHaveLength(1);
    const perMaster = masters.map((_, i) => holders.filter((h) => h[0] === i).length);
    expect(perMaster).toEqual([2, 2, 2]);
    // Each company's event jobs completed on its own shard's master.
    for (const c of companies) {
      const prefix = prefixes[shardOf(c.id, shards)]!;
      const completed = await redis.zcard(`${prefix}:${JOBS.shipmentEvent.queue}:completed`);
      expect(completed).toBe(3);
    }
  }, 60_000);
});
