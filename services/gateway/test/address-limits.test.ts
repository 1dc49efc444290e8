import type { IncomingMessage } from 'node:http';
import { randomBytes } from 'node:crypto';
import request from 'supertest';
import { ADMIN_AUTH_FAILURES_PER_WINDOW, API_AUTH_FAILURES_PER_WINDOW } from '../src/auth/admin-auth.limiter';
import { clientAddressResolver } from '../src/http/client-address';
import { loadGatewayConfig } from '../src/config';
import { PORTAL_SESSIONS_PER_MINUTE } from '../src/rate-limit/portal-session.limit';
import { ADMIN_TOKEN, bearer, createCompany, startGatewayFixture, type GatewayFixture, type TestGateway } from '../../../test/support/test-gateway';

const req = (remoteAddress: string, forwardedFor?: string | string[]): IncomingMessage =>
  ({ socket: { remoteAddress }, headers: forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor } }) as unknown as IncomingMessage;

/** The value of one counter's series on a gateway's own registry. */
async function counter(gw: TestGateway, name: string, labels: Record<string, string>): Promise<number> {
  const metric = (await gw.deps.metrics.registry.getMetricsAsJSON()).find((m) => m.name === name);
  const value = metric?.values.find((v) => Object.entries(labels).every(([k, want]) => v.labels[k] === want));
  return Number(value?.value ?? 0);
}

describe('the client address', () => {
  it('is the TCP peer unless the peer is a trusted proxy; X-Forwarded-For is read from the right, one trusted hop at a time', () => {
    const none = clientAddressResolver([]);
    expect(none(req('203.0.113.9', '198.51.100.1'))).toBe('203.0.113.9');
    expect(none(req('::ffff:203.0.113.9'))).toBe('203.0.113.9');

    const lb = clientAddressResolver(['10.0.0.0/8', '::1']);
    // An untrusted peer's header is ignored: it could write anything.
    expect(lb(req('203.0.113.9', '198.51.100.1'))).toBe('203.0.113.9');
    // The proxy's peer, as it appended it; whatever the client wrote to its left is not read.
    expect(lb(req('10.1.2.3', '6.6.6.6, 198.51.100.1'))).toBe('198.51.100.1');
    expect(lb(req('::ffff:10.1.2.3', '198.51.100.1'))).toBe('198.51.100.1');
    // Two trusted hops: the first address that is no trusted proxy.
    expect(lb(req('10.1.2.3', '198.51.100.1, 10.9.9.9'))).toBe('198.51.100.1');
    expect(lb(req('10.1.2.3', ['6.6.6.6', '198.51.100.1, 10.9.9.9']))).toBe('198.51.100.1');
    // Garbage ends the walk at the hop before it; no header, the proxy itself.
    expect(lb(req('10.1.2.3', 'not-an-ip'))).toBe('10.1.2.3');
    expect(lb(req('10.1.2.3', '198.51.100.1, bogus, 10.9.9.9'))).toBe('10.9.9.9');
    expect(lb(req('10.1.2.3'))).toBe('10.1.2.3');
    expect(lb(req('::1', '2001:db8::7'))).toBe('2001:db8::7');
  });

  it('TRUSTED_PROXIES takes addresses and CIDRs and refuses anything else', () => {
    expect(loadGatewayConfig({ TRUSTED_PROXIES: '10.0.0.0/8, 127.0.0.1,::1' }).trustedProxies).toEqual(['10.0.0.0/8', '127.0.0.1', '::1']);
    expect(loadGatewayConfig({}).trustedProxies).toEqual([]);
    expect(() => loadGatewayConfig({ TRUSTED_PROXIES: '10.0.0.0/33' })).toThrow(/TRUSTED_PROXIES/);
    expect(() => loadGatewayConfig({ TRUSTED_PROXIES: 'proxy.internal' })).toThrow(/TRUSTED_PROXIES/);
  });
});

describe('behind a trusted proxy, each client has its own limits', () => {
  let fx: GatewayFixture;
  let gw: TestGateway;
  const wrong = 'wrong-admin-token-guess-0123456789-abcdefgh';
  const raw = () => request(`http://127.0.0.1:${gw.port}`);
  const admin = (token: string, client: string) =>
    raw().get('/internal/v1/empresas/00000000-0000-4000-8000-000000000000').set('Authorization', bearer(token)).set('X-Forwarded-For', client);
  const unknownToken = () => `svc_live_${randomBytes(32).toString('base64url')}`;

  beforeAll(async () => {
    // The tests' requests come from loopback: it plays the load balancer.
    fx = await startGatewayFixture('address-limits', { env: { TRUSTED_PROXIES: '127.0.0.0/8,::1' } });
    gw = fx.gw;
  });
  afterAll(() => fx?.stop());

  it('a guesser is held and counted; the right token passes from the same client; another client is not held', async () => {
    for (let i = 0; i < ADMIN_AUTH_FAILURES_PER_WINDOW; i++) expect((await admin(`${wrong}-${i}`, '198.51.100.1')).status).toBe(401);
    const held = await admin(`${wrong}-x`, '198.51.100.1');
    expect(held.status).toBe(429);
    expect(held.body.error.code).toBe('RATE_LIMIT_EXCEEDED');
    // The right token, from the very client that is held: through the guard (no such company).
    expect((await admin(ADMIN_TOKEN, '198.51.100.1')).status).toBe(404);
    // Another client behind the same proxy: its wrong token is a plain 401.
    expect((await admin(wrong, '198.51.100.2')).status).toBe(401);
    expect(await counter(gw, 'svc_admin_auth_failures_total', { reason: 'wrong' })).toBe(ADMIN_AUTH_FAILURES_PER_WINDOW + 1);
    expect(await counter(gw, 'svc_admin_auth_failures_total', { reason: 'limited' })).toBe(1);
    const logged = gw.logs.lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === 'admin authentication failed');
    expect(new Set(logged.map((l) => l.address))).toEqual(new Set(['198.51.100.1', '198.51.100.2']));
  });

  it('failed API authentications are limited per client before the lookup; a cached valid token still passes', async () => {
    const c = await createCompany(gw);
    const api = (token: string, client: string) => raw().get('/api/v1/empresa').set('Authorization', bearer(token)).set('X-Forwarded-For', client);
    expect((await api(c.live, '198.51.100.10')).status).toBe(200);
    for (let i = 0; i < API_AUTH_FAILURES_PER_WINDOW; i++) {
      const res = await api(unknownToken(), '198.51.100.10');
      if (res.status !== 401) throw new Error(`failure ${i}: ${res.status}`);
    }
    const misses = await counter(gw, 'svc_token_cache_lookups_total', { result: 'miss' });
    const held = await api(unknownToken(), '198.51.100.10');
    expect(held.status).toBe(429);
    expect(held.body).toEqual({ success: false, error: { code: 'RATE_LIMIT_EXCEEDED', message: expect.any(String) } });
    expect(Number(held.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(held.headers['x-ratelimit-limit']).toEqual(expect.any(String));
    // Refused before the lookup: no cache miss, so no Postgres query.
    expect(await counter(gw, 'svc_token_cache_lookups_total', { result: 'miss' })).toBe(misses);
    expect(await counter(gw, 'svc_address_limit_refusals_total', { door: 'api' })).toBe(1);
    // The client's own valid token, known to the cache, is not refused; nor is another client.
    expect((await api(c.live, '198.51.100.10')).status).toBe(200);
    expect((await api(unknownToken(), '198.51.100.11')).status).toBe(401);
    expect((await api(c.test, '198.51.100.11')).status).toBe(200);
  });

  it('portal session starts are limited per client', async () => {
    const start = (client: string) => raw().post('/portal/v1/sesion').set('X-Forwarded-For', client).send({ enlace: randomBytes(32).toString('base64url') });
    for (let i = 0; i < PORTAL_SESSIONS_PER_MINUTE; i++) {
      const res = await start('198.51.100.20');
      if (res.status === 429) throw new Error(`start ${i} was limited`);
    }
    const held = await start('198.51.100.20');
    expect(held.status).toBe(429);
    expect(held.body.error.code).toBe('RATE_LIMIT_EXCEEDED');
    expect(Number(held.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect((await start('198.51.100.21')).status).not.toBe(429);
    expect(await counter(gw, 'svc_address_limit_refusals_total', { door: 'portal_session' })).toBe(1);
  });
});

describe('without trusted proxies, X-Forwarded-For is ignored', () => {
  let fx: GatewayFixture;

  beforeAll(async () => {
    fx = await startGatewayFixture('address-untrusted');
  });
  afterAll(() => fx?.stop());

  it('guesses naming different clients share the peer\'s one count', async () => {
    const raw = request(`http://127.0.0.1:${fx.gw.port}`);
    const statuses: number[] = [];
    for (let i = 0; i <= ADMIN_AUTH_FAILURES_PER_WINDOW; i++) {
      const res = await raw.get('/internal/v1/empresas/x').set('Authorization', bearer(`guess-number-${i}`)).set('X-Forwarded-For', `198.51.100.${i + 1}`);
      statuses.push(res.status);
    }
    expect(statuses.slice(0, ADMIN_AUTH_FAILURES_PER_WINDOW)).toEqual(Array(ADMIN_AUTH_FAILURES_PER_WINDOW).fill(401));
    expect(statuses[ADMIN_AUTH_FAILURES_PER_WINDOW]).toBe(429);
    expect((await raw.get('/internal/v1/empresas/x').set('Authorization', bearer(ADMIN_TOKEN))).status).toBe(404);
  });
});
