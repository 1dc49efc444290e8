import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import type { RedisClient } from '@svc/platform';
import type { Principal } from '../src/auth/principal';
import { TokenCache } from '../src/auth/token-cache';
import { TOKEN_FORMAT } from '../src/auth/token';
import { CONNECTIONS_CHECK_INTERVAL_MS, HEADERS_TIMEOUT_MS, KEEP_ALIVE_TIMEOUT_MS, MAX_CONNECTIONS, REQUEST_TIMEOUT_MS } from '../src/gateway';
import { bearer, createCompany, startGatewayFixture, type GatewayFixture } from '../../../test/support/test-gateway';
import { testRedisClient } from '../../../test/support/redis-prefix';
import { testRedisKeys } from '../../../test/support/env';

const principal = (n: number): Principal => ({
  tokenId: `t${n}`,
  tokenHash: `h${n}`,
  modo: 'live',
  empresa: { id: `e${n}`, nombre: `Empresa ${n}`, sucursalesHabilitadas: false },
  sucursal: null,
});
const envelope401 = { success: false, error: { code: 'AUTH_REQUIRED', message: expect.any(String) } };

describe('the token cache keeps failed lookups apart', () => {
  // Real Redis clients (the cache's constructor takes them); these tests only use its memory.
  const redis = testRedisClient() as unknown as RedisClient;
  afterAll(async () => {
    await redis.quit();
  });

  it('a flood of unknown tokens never evicts a valid entry; its own bound holds', () => {
    const cache = new TokenCache(redis, redis, testRedisKeys('svctest:cache'), { maxEntries: 3, maxInvalidEntries: 5 });
    const epoch = cache.currentEpoch();
    for (let i = 1; i <= 3; i++) cache.set(`valid-${i}`, principal(i), epoch);
    for (let i = 0; i < 1000; i++) cache.set(`unknown-${i}`, null, epoch);
    for (let i = 1; i <= 3; i++) expect(cache.get(`valid-${i}`)).toEqual(principal(i));
    expect(cache.sizes()).toEqual({ valid: 3, invalid: 5 });
    // The newest unknown ones are the ones kept, still answering "invalid" without a lookup.
    expect(cache.get('unknown-999')).toBeNull();
    expect(cache.get('unknown-0')).toBeUndefined();
    // Valid entries still have their own bound: a fourth pushes out the oldest valid one only.
    cache.set('valid-4', principal(4), epoch);
    expect([cache.get('valid-1'), cache.get('valid-2'), cache.get('valid-4')]).toEqual([undefined, principal(2), principal(4)]);
    expect(cache.sizes()).toEqual({ valid: 3, invalid: 5 });
  });

  it('both kinds expire after the TTL and drop on invalidation', () => {
    let now = 0;
    const cache = new TokenCache(redis, redis, testRedisKeys('svctest:cache'), { ttlMs: 60_000, now: () => now });
    cache.set('a', principal(1), cache.currentEpoch());
    cache.set('b', null, cache.currentEpoch());
    now = 59_999;
    expect([cache.get('a'), cache.get('b')]).toEqual([principal(1), null]);
    now = 60_000;
    expect([cache.get('a'), cache.get('b')]).toEqual([undefined, undefined]);
    cache.set('b', null, cache.currentEpoch());
    cache.delete('b');
    expect(cache.get('b')).toBeUndefined();
  });
});

describe('a bearer that is not a token is refused before any lookup', () => {
  let fx: GatewayFixture;

  beforeAll(async () => {
    fx = await startGatewayFixture('token-format');
  });
  afterAll(() => fx?.stop());

  it('matches the issued tokens and nothing shorter or of another alphabet', async () => {
    const c = await createCompany(fx.gw);
    expect([c.live, c.test].every((t) => TOKEN_FORMAT.test(t))).toBe(true);
    const random = randomBytes(32).toString('base64url');
    for (const ok of [`svc_live_${random}`, `svc_test_${random}`, `svc_live_${random}${random}`]) expect(TOKEN_FORMAT.test(ok)).toBe(true);
    for (const bad of [`svc_live_${random.slice(1)}`, `svc_live_${random.slice(1)}+`, `svc_prod_${random}`, `SVC_LIVE_${random}`, `svc_live_${random}=`, 'svc_live_fuzz']) {
      expect({ bad, ok: TOKEN_FORMAT.test(bad) }).toEqual({ bad, ok: false });
    }
  });

  it('with Postgres cut off, a malformed bearer still gets 401 at once; a well-formed unknown one needs the lookup (503)', async () => {
    const gw = await fx.addGateway({ viaProxies: true });
    const { postgres } = await fx.proxies();
    const c = await createCompany(fx.gw);
    expect((await gw.http.get('/api/v1/empresa').set('Authorization', bearer(c.live))).status).toBe(200); // cached now
    postgres.cut();
    try {
      const malformed = ['svc_live_fuzz', `svc_live_${'x'.repeat(42)}`, `svc_test_${'y'.repeat(42)}!`, `svc_live_${'z'.repeat(43)}.`];
      for (const token of malformed) {
        const res = await gw.http.get('/api/v1/empresa').set('Authorization', bearer(token));
        expect({ token, status: res.status, body: res.body }).toEqual({ token, status: 401, body: envelope401 });
      }
      // The same shape as an issued token: only the database can say, and it is not there.
      const wellFormed = await gw.http.get('/api/v1/empresa').set('Authorization', bearer(`svc_live_${randomBytes(32).toString('base64url')}`));
      expect(wellFormed.status).toBe(503);
      // A valid token in the cache still works without Postgres.
      expect((await gw.http.get('/api/v1/empresa').set('Authorization', bearer(c.live))).status).toBe(200);
    } finally {
      postgres.restore();
    }
    expect(gw.deps.tokenCache.sizes().invalid).toBe(0);
  }, 30_000);
});

describe('the listeners bound slow and idle clients', () => {
  let fx: GatewayFixture;

  beforeAll(async () => {
    fx = await startGatewayFixture('server-limits', { env: { ADMIN_PORT: '0' } });
  });
  afterAll(() => fx?.stop());

  it('short header, request and keep-alive timeouts and a connection cap on the public and the admin listener', async () => {
    for (const server of [fx.gw.server, fx.gw.adminServer!]) {
      expect({
        headersTimeout: server.headersTimeout,
        requestTimeout: server.requestTimeout,
        keepAliveTimeout: server.keepAliveTimeout,
        maxConnections: server.maxConnections,
      }).toEqual({ headersTimeout: HEADERS_TIMEOUT_MS, requestTimeout: REQUEST_TIMEOUT_MS, keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS, maxConnections: MAX_CONNECTIONS });
    }
    expect(HEADERS_TIMEOUT_MS).toBeLessThanOrEqual(10_000);
    expect(REQUEST_TIMEOUT_MS).toBeLessThanOrEqual(30_000);
    expect(KEEP_ALIVE_TIMEOUT_MS).toBeLessThanOrEqual(15_000);
  });

  it('a client that never finishes its headers is answered 408 with the envelope and dropped, within the headers timeout', async () => {
    const started = Date.now();
    const answer = await new Promise<string>((resolve) => {
      const socket = connect(fx.gw.port, '127.0.0.1');
      let text = '';
      socket.on('data', (b: Buffer) => (text += b.toString('utf8')));
      socket.on('close', () => resolve(text));
      socket.on('error', () => undefined);
      socket.write('GET /api/v1/empresa HTTP/1.1\r\nHost: x\r\n'); // and nothing more
    });
    const elapsed = Date.now() - started;
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(answer).toContain('"code":"VALIDATION_ERROR"');
    expect(elapsed).toBeGreaterThanOrEqual(HEADERS_TIMEOUT_MS - 100);
    expect(elapsed).toBeLessThan(HEADERS_TIMEOUT_MS + 2 * CONNECTIONS_CHECK_INTERVAL_MS + 1000);
  }, 30_000);
});
