import type { Cluster, Redis } from 'ioredis';
import { createRedisClient } from '@svc/platform';
import { TEST_REDIS_CLUSTER_NODES, TEST_REDIS_URL, testRedisKeys } from '../../../test/support/env';
import { dropPrefix, testRedisClient, uniquePrefix } from '../../../test/support/redis-prefix';
import { RateLimiter } from '../src/rate-limit/rate-limiter';

// The limiter sends the hits of one turn of the event loop to Redis in one pipeline. These hits are
// all made in the same turn, so each test's hits share pipelines: the counts, headers' values and
// revocations must be exactly what one call per hit gave.
describe('rate limiter: hits of one turn of the event loop, sent together', () => {
  const prefix = uniquePrefix('rl-batch');
  const keys = testRedisKeys(prefix);
  let redis: Redis | Cluster;

  beforeAll(() => {
    redis = testRedisClient();
  });
  afterAll(async () => {
    redis.disconnect();
    await dropPrefix(prefix);
  });

  const revokedKey = (token: string): string => keys.of('auth:revoked', token);

  it('counts each token exactly: 3 tokens x 15 hits at once with a limit of 10', async () => {
    const limiter = new RateLimiter(redis, keys, 10);
    const started = Date.now();
    const tokens = ['a', 'b', 'c'];
    const decisions = await Promise.all(
      Array.from({ length: 45 }, (_, i) => {
        const t = tokens[i % 3]!;
        return limiter.hit(`tok-${t}`, revokedKey(t), t).then((d) => ({ t, d }));
      }),
    );
    for (const t of tokens) {
      const mine = decisions.filter((x) => x.t === t).map((x) => x.d);
      expect(mine.filter((d) => d.allowed)).toHaveLength(10);
      // In the order sent: remaining 9..0 for the first ten, then 0 and refused.
      expect(mine.map((d) => d.remaining)).toEqual([9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0, 0, 0, 0, 0]);
      expect(mine.map((d) => d.allowed)).toEqual([...Array<boolean>(10).fill(true), ...Array<boolean>(5).fill(false)]);
      for (const d of mine) {
        expect(d).toMatchObject({ revoked: false, limit: 10 });
        // Reset: the oldest entry's time + 60 s, in whole seconds (Redis's clock, close to ours).
        expect(d.resetSeconds).toBeGreaterThanOrEqual(Math.floor(started / 1000) + 59);
        expect(d.resetSeconds).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000) + 61);
        if (!d.allowed) {
          expect(d.retryAfterSeconds).toBeGreaterThanOrEqual(1);
          expect(d.retryAfterSeconds).toBeLessThanOrEqual(60);
        }
      }
      expect(await redis.zcard(keys.of('rl', `tok-${t}`, t))).toBe(10);
    }
  });

  it('tells a revoked token apart from the others of the same batch, and does not count it', async () => {
    const limiter = new RateLimiter(redis, keys, 100);
    await redis.set(revokedKey('gone'), '1', 'EX', 60);
    const [kept1, gone, kept2] = await Promise.all([
      limiter.hit('tok-kept', revokedKey('kept'), 'kept'),
      limiter.hit('tok-gone', revokedKey('gone'), 'gone'),
      limiter.hit('tok-kept', revokedKey('kept'), 'kept'),
    ]);
    expect(gone!.revoked).toBe(true);
    expect(gone!.allowed).toBe(false);
    expect([kept1!.remaining, kept2!.remaining]).toEqual([99, 98]);
    expect(kept1!.revoked || kept2!.revoked).toBe(false);
    expect(await redis.exists(keys.of('rl', 'tok-gone', 'gone'))).toBe(0);
  });

  it('one hit on its own is sent on its own, with the same answer', async () => {
    const limiter = new RateLimiter(redis, keys, 5);
    const first = await limiter.hit('tok-alone', revokedKey('alone'), 'alone');
    const second = await limiter.hit('tok-alone', revokedKey('alone'), 'alone');
    expect([first.remaining, second.remaining]).toEqual([4, 3]);
    expect(second.resetSeconds).toBe(first.resetSeconds);
  });

  it('rejects every hit of a batch when Redis cannot be written to (the gateway answers 503)', async () => {
    // The gateway's own kind of client (fails fast: no offline queue), connected then closed.
    const nodes = TEST_REDIS_CLUSTER_NODES?.split(',').map((n) => ({ host: n.split(':')[0]!, port: Number(n.split(':')[1]) }));
    const closed = createRedisClient({ redisUrl: TEST_REDIS_URL, redisClusterNodes: nodes }, 'commands');
    closed.on('error', () => undefined);
    await closed.connect();
    closed.disconnect();
    const limiter = new RateLimiter(closed, keys, 5);
    const results = await Promise.allSettled([limiter.hit('tok-x', revokedKey('x'), 'x'), limiter.hit('tok-y', revokedKey('y'), 'y')]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    const single = await limiter.hit('tok-z', revokedKey('z'), 'z').then(
      () => 'resolved',
      () => 'rejected',
    );
    expect(single).toBe('rejected');
  });
});
