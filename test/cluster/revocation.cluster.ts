import { Cluster } from 'ioredis';
import { eventually } from '../support/eventually';
import { testRedisClient } from '../support/redis-prefix';
import { startGatewayFixture, type GatewayFixture, type TestGateway } from '../support/test-gateway';

// The cache invalidation itself, apart from the revoked mark that auth.test.ts's "at once" also
// rests on: one gateway's SPUBLISH reaches the other's sharded subscriber.
describe('token cache invalidation on a Redis Cluster', () => {
  let fx: GatewayFixture;
  let a: TestGateway;
  let b: TestGateway;

  beforeAll(async () => {
    fx = await startGatewayFixture('cluster-revoke');
    a = fx.gw;
    b = await fx.addGateway();
  });
  afterAll(() => fx?.stop());

  it('subscribes every gateway to one sharded channel under the hash tag', async () => {
    expect(a.deps.redis.isCluster).toBe(true);
    const channel = `{${fx.prefix}}:auth:invalidate`;
    expect(b.deps.tokenCache.channel).toBe(channel);
    const redis = testRedisClient() as Cluster;
    try {
      await redis.ping();
      const counts = await Promise.all(redis.nodes('master').map((n) => n.call('PUBSUB', 'SHARDNUMSUB', channel) as Promise<[string, number]>));
      // Only the master that owns the channel's slot counts its subscribers: both gateways.
      expect(counts.map(([, n]) => Number(n)).sort()).toEqual([0, 0, 2]);
    } finally {
      redis.disconnect();
    }
  });

  it("drops another gateway's cached entry", async () => {
    const cache = b.deps.tokenCache;
    cache.set('some-token-hash', null, cache.currentEpoch());
    expect(cache.get('some-token-hash')).toBeNull();
    await a.deps.tokenCache.invalidate(['some-token-hash'], { revoke: true });
    await eventually(async () => cache.get('some-token-hash') === undefined, 2000, "b's cache entry dropped");
  });
});
