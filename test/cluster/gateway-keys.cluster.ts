import { createHash } from 'node:crypto';
import type { Cluster } from 'ioredis';
import { keySlot } from '@svc/platform';
import { testRedisClient } from '../support/redis-prefix';
import { bearer, createCompany, startGatewayFixture, type GatewayFixture } from '../support/test-gateway';

// The gateway's own keys on a cluster: each token's rate-limit window and revocation mark under the
// token's own hash tag (one slot for the two, as the script needs), so many tokens spread over the
// masters instead of all sitting in the stack's one slot.
describe("the gateway's keys on a Redis Cluster", () => {
  let fx: GatewayFixture;
  let redis: Cluster;
  beforeAll(async () => {
    fx = await startGatewayFixture('cluster-gateway-keys');
    redis = testRedisClient() as Cluster;
    await redis.ping();
  });
  afterAll(async () => {
    redis?.disconnect();
    await fx?.stop();
  });

  const sha256 = (token: string): string => createHash('sha256').update(token).digest('hex');

  it("puts each token's window and revocation mark in the token's slot, and the tokens over every master", async () => {
    const masters = redis.nodes('master');
    const held = new Set<number>();
    for (let i = 0; i < 12; i++) {
      const c = await createCompany(fx.gw);
      expect((await fx.gw.http.get('/api/v1/empresa').set('Authorization', bearer(c.live))).status).toBe(200);
      const hash = sha256(c.live);
      const tokenId = (await fx.pool.query<{ id: string }>('select id from tokens where hash = $1', [hash])).rows[0]!.id;
      const window = fx.gw.deps.rateLimiter.keys.of('rl', tokenId, hash);
      const mark = fx.gw.deps.tokenCache.revokedKey(hash);
      expect(window).toBe(`${fx.prefix}:rl:${tokenId}:{${hash}}`);
      expect(mark).toBe(`${fx.prefix}:auth:revoked:{${hash}}`);
      expect(keySlot(window)).toBe(keySlot(mark));
      expect(await redis.zcard(window)).toBe(1);
      const slot = keySlot(window);
      const owners = await Promise.all(masters.map(async (m) => Number(await m.call('CLUSTER', 'COUNTKEYSINSLOT', String(slot))) > 0));
      expect(owners.filter(Boolean)).toHaveLength(1);
      held.add(owners.indexOf(true));
    }
    // 12 tokens on random slots: all on one master would mean they share a tag again.
    expect(held.size).toBeGreaterThanOrEqual(2);
  });
});
