import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import request from 'supertest';
import { ADMIN_AUTH_FAILURES_PER_WINDOW } from '../src/auth/admin-auth.limiter';
import { ADMIN_TOKEN, bearer, createCompany, startGatewayFixture, type GatewayFixture, type TestGateway } from '../../../test/support/test-gateway';
import { testRedisClient } from '../../../test/support/redis-prefix';
import { testKeyPrefix } from '../../../test/support/env';
import { issuePortalLink, startPortalSession } from '../../../test/support/portal-session';

const notFound = { success: false, error: { code: 'NOT_FOUND', message: expect.any(String) } };

/** A plain agent (answers not checked against the documents: these probe what no document has). */
const raw = (port: number) => request(`http://127.0.0.1:${port}`);

/** One request from a chosen loopback source address, to be another client to the limiter. */
function fromAddress(port: number, localAddress: string, path: string, token: string): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, path, method: 'GET', localAddress, headers: { Authorization: bearer(token) } }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString('utf8')));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as unknown }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('the operator door with ADMIN_PORT set', () => {
  let fx: GatewayFixture;
  let gw: TestGateway;

  beforeAll(async () => {
    fx = await startGatewayFixture('admin-door', { env: { ADMIN_PORT: '0' } });
    gw = fx.gw;
  });
  afterAll(() => fx?.stop());

  it('serves /internal/v1 on the admin port only, bound to 127.0.0.1; on PORT it is 404 even with the admin token', async () => {
    expect(gw.adminPort).toEqual(expect.any(Number));
    expect(gw.adminPort).not.toBe(gw.port);
    expect((gw.adminServer!.address() as AddressInfo).address).toBe('127.0.0.1');

    const onPublic = await raw(gw.port).post('/internal/v1/empresas').set('Authorization', bearer(ADMIN_TOKEN)).send({ nombre: 'Por la puerta pública' });
    expect(onPublic.status).toBe(404);
    expect(onPublic.body).toEqual(notFound);
    const get = await raw(gw.port).get('/internal/v1/empresas/00000000-0000-4000-8000-000000000000').set('Authorization', bearer(ADMIN_TOKEN));
    expect(get.status).toBe(404);
    expect(await fx.pool.query('select count(*)::int n from empresas').then((r) => r.rows[0].n as number)).toBe(0);

    // The admin port: the same route works, and a company made there serves the public API on PORT.
    const c = await createCompany(gw, { nombre: 'Por la puerta del operador' });
    const read = await raw(gw.adminPort!).get(`/internal/v1/empresas/${c.id}`).set('Authorization', bearer(ADMIN_TOKEN));
    expect(read.status).toBe(200);
    expect(read.body.data.nombre).toBe('Por la puerta del operador');
    const empresa = await gw.http.get('/api/v1/empresa').set('Authorization', bearer(c.live));
    expect(empresa.status).toBe(200);
    // The internal document is served on the admin side only; nothing else is.
    expect((await raw(gw.port).get('/internal/v1/openapi.json').set('Authorization', bearer(ADMIN_TOKEN))).status).toBe(404);
    expect((await raw(gw.adminPort!).get('/api/v1/empresa').set('Authorization', bearer(c.live))).body).toEqual(notFound);
    expect((await raw(gw.adminPort!).get('/openapi.json')).status).toBe(404);
    // Routing is case-sensitive on the admin port too.
    expect((await raw(gw.adminPort!).get(`/INTERNAL/V1/empresas/${c.id}`).set('Authorization', bearer(ADMIN_TOKEN))).status).toBe(404);
    expect((await raw(gw.adminPort!).get(`/internal/v1/EMPRESAS/${c.id}`).set('Authorization', bearer(ADMIN_TOKEN))).status).toBe(404);
  });

  it("moves the portal's internal routes with it; the link it issues points at the public port, where the session starts", async () => {
    const c = await createCompany(gw, { nombre: 'Portal por la puerta del operador' });
    const path = `/internal/v1/empresas/${c.id}/portal`;
    const onPublic = await raw(gw.port).post(path).set('Authorization', bearer(ADMIN_TOKEN)).send({ usuario: 'ana@operador.gt' });
    expect({ status: onPublic.status, body: onPublic.body }).toEqual({ status: 404, body: notFound });
    expect((await raw(gw.port).delete(path).set('Authorization', bearer(ADMIN_TOKEN))).status).toBe(404);
    expect(await fx.pool.query('select count(*)::int n from portal_enlaces').then((r) => r.rows[0].n as number)).toBe(0);

    // On the admin port (PORT is 0 here, so the public port is the one it took, never the admin one).
    const link = await issuePortalLink(gw, c.id, 'ana@operador.gt');
    expect(new URL(link.url).origin).toBe(`http://localhost:${gw.port}`);
    const session = await startPortalSession(gw, link.secret);
    expect(session.status).toBe(201);
    // The session's API is public: the admin port does not serve it.
    expect((await raw(gw.adminPort!).post('/portal/v1/sesion').send({ enlace: link.secret })).status).toBe(404);
    const ended = await gw.admin('delete', `/empresas/${c.id}/portal`);
    expect(ended.status).toBe(200);
    expect(ended.body.data).toEqual({ sesionesTerminadas: 1 });
  });
});

describe('the portal link with ADMIN_PORT and PORTAL_BASE_URL set', () => {
  let fx: GatewayFixture;

  beforeAll(async () => {
    fx = await startGatewayFixture('admin-door-portal-url', { env: { ADMIN_PORT: '0', PORTAL_BASE_URL: 'https://portal.courier.example/ignored/path' } });
  });
  afterAll(() => fx?.stop());

  it("takes the link's origin from PORTAL_BASE_URL", async () => {
    const c = await createCompany(fx.gw);
    const link = await issuePortalLink(fx.gw, c.id);
    expect(link.url).toMatch(/^https:\/\/portal\.courier\.example\/portal\/entrar#[A-Za-z0-9_-]{43}$/);
  });
});

describe('routing is case-sensitive (ADMIN_PORT unset: /internal/v1 on PORT)', () => {
  let fx: GatewayFixture;
  let gw: TestGateway;

  beforeAll(async () => {
    fx = await startGatewayFixture('case-routes');
    gw = fx.gw;
  });
  afterAll(() => fx?.stop());

  it('/INTERNAL/V1/empresas and /API/V1/... are 404 (a case-sensitive rule in front cannot be passed); the exact paths work', async () => {
    const c = await createCompany(gw);
    const admin = (path: string) => raw(gw.port).post(path).set('Authorization', bearer(ADMIN_TOKEN)).send({ nombre: 'Mayúsculas' });
    for (const path of ['/INTERNAL/V1/empresas', '/Internal/v1/empresas', '/internal/V1/empresas', '/internal/v1/Empresas']) {
      const res = await admin(path);
      expect({ path, status: res.status, body: res.body }).toEqual({ path, status: 404, body: notFound });
    }
    expect((await admin('/internal/v1/empresas')).status).toBe(201);
    const api = (path: string) => raw(gw.port).get(path).set('Authorization', bearer(c.live));
    for (const path of ['/API/V1/empresa', '/api/V1/empresa', '/api/v1/EMPRESA', '/Api/v1/guias']) {
      const res = await api(path);
      expect({ path, status: res.status, body: res.body }).toEqual({ path, status: 404, body: notFound });
    }
    expect((await api('/api/v1/empresa')).status).toBe(200);
    // A trailing slash still reaches its route (not strict), as before.
    expect((await api('/api/v1/empresa/')).status).toBe(200);
    expect((await raw(gw.port).get('/OPENAPI.JSON')).status).toBe(404);
    expect((await raw(gw.port).get('/openapi.json')).status).toBe(200);
  });
});

describe('failed admin authentication is limited per client address', () => {
  let fx: GatewayFixture;
  let gw: TestGateway;

  beforeAll(async () => {
    fx = await startGatewayFixture('admin-limit');
    gw = fx.gw;
  });
  afterAll(() => fx?.stop());

  const wrong = 'wrong-admin-token-guess-0123456789-abcdefgh';
  const ask = (g: TestGateway, token: string | undefined) => {
    const r = raw(g.port).get('/internal/v1/empresas/00000000-0000-4000-8000-000000000000');
    return token === undefined ? r : r.set('Authorization', bearer(token));
  };

  it(`answers ${ADMIN_AUTH_FAILURES_PER_WINDOW} wrong tokens 401, then 429 with the envelope on every instance, while the right one still passes; logged at warn, never the token`, async () => {
    // What is no guess is refused and logged, but not counted: it cannot open the door.
    for (let i = 0; i < ADMIN_AUTH_FAILURES_PER_WINDOW + 5; i++) expect((await ask(gw, undefined)).status).toBe(401);
    expect((await raw(gw.port).get('/internal/v1/empresas/x').set('Authorization', 'Basic dXNlcjpwYXNz')).status).toBe(401);
    expect((await ask(gw, ADMIN_TOKEN)).status).toBe(404); // through the guard: no such company

    for (let i = 0; i < ADMIN_AUTH_FAILURES_PER_WINDOW; i++) {
      const res = await ask(gw, `${wrong}-${i}`);
      expect({ i, status: res.status, code: res.body.error?.code }).toEqual({ i, status: 401, code: 'AUTH_REQUIRED' });
    }
    const limited = await ask(gw, `${wrong}-x`);
    expect(limited.status).toBe(429);
    expect(limited.body).toEqual({ success: false, error: { code: 'RATE_LIMIT_EXCEEDED', message: expect.any(String) } });
    expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(Number(limited.headers['retry-after'])).toBeLessThanOrEqual(60);
    expect(limited.headers['x-request-id']).toEqual(expect.any(String));
    // Held for wrong tokens on another gateway too (same Redis); the right token is never refused
    // for the address's failures (issue 42, M1: before, it got the same 429).
    const other = await fx.addGateway();
    expect((await ask(other, `${wrong}-y`)).status).toBe(429);
    expect((await ask(gw, ADMIN_TOKEN)).status).toBe(404);
    expect((await ask(other, ADMIN_TOKEN)).status).toBe(404);

    // Another client address is not held.
    const elsewhere = await fromAddress(gw.port, '127.0.0.2', '/internal/v1/empresas/00000000-0000-4000-8000-000000000000', ADMIN_TOKEN);
    expect(elsewhere.status).toBe(404);

    // Logged at warn (pino level 40) with the address, the count, and never a presented value.
    const lines = gw.logs.lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    const failed = lines.filter((l) => l.msg === 'admin authentication failed');
    expect(failed.filter((l) => l.reason === 'wrong')).toHaveLength(ADMIN_AUTH_FAILURES_PER_WINDOW);
    expect(failed.filter((l) => l.reason === 'missing').length).toBeGreaterThanOrEqual(ADMIN_AUTH_FAILURES_PER_WINDOW);
    for (const l of failed) expect(l).toMatchObject({ level: 40, address: expect.stringMatching(/127\.0\.0\.1$/) });
    expect(failed.filter((l) => l.reason === 'wrong').map((l) => l.failures)).toEqual(Array.from({ length: ADMIN_AUTH_FAILURES_PER_WINDOW }, (_, i) => i + 1));
    expect(lines.filter((l) => l.msg === 'admin authentication limited')).toEqual([expect.objectContaining({ level: 40, limit: ADMIN_AUTH_FAILURES_PER_WINDOW })]);
    expect(gw.logs.text()).not.toContain(wrong);
    expect(gw.logs.text()).not.toContain(ADMIN_TOKEN);

    // The window is Redis's: once it ends (its key expires; removed here), wrong tokens are answered 401 again.
    const redis = testRedisClient();
    try {
      const keys = await redis.keys(`${testKeyPrefix(fx.prefix)}:admin:auth:*`);
      expect(keys.length).toBeGreaterThanOrEqual(1);
      const ttl = await redis.pttl(keys.find((k) => k.endsWith(':127.0.0.1')) ?? keys[0]!);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(60_000);
      await redis.del(...keys);
    } finally {
      await redis.quit();
    }
    expect((await ask(gw, `${wrong}-z`)).status).toBe(401);
    expect((await ask(gw, ADMIN_TOKEN)).status).toBe(404);
  });

  it('right tokens are not counted, even many at once; concurrent wrong ones get exactly the limit of 401s', async () => {
    const redis = testRedisClient();
    try {
      await redis.del(...(await redis.keys(`${testKeyPrefix(fx.prefix)}:admin:auth:*`)), 'none');
    } finally {
      await redis.quit();
    }
    // Many at once: right tokens never use the window up.
    const right = await Promise.all(Array.from({ length: ADMIN_AUTH_FAILURES_PER_WINDOW * 3 }, () => ask(gw, ADMIN_TOKEN)));
    expect(right.map((r) => r.status)).toEqual(Array(ADMIN_AUTH_FAILURES_PER_WINDOW * 3).fill(404));
    // Wrong guesses at once: each takes its own count, so exactly the limit are answered 401.
    const guesses = await Promise.all(Array.from({ length: ADMIN_AUTH_FAILURES_PER_WINDOW * 3 }, (_, i) => ask(gw, `${wrong}-${i}`)));
    const statuses = guesses.map((r) => r.status);
    expect(statuses.filter((s) => s === 401)).toHaveLength(ADMIN_AUTH_FAILURES_PER_WINDOW);
    expect(statuses.filter((s) => s === 429)).toHaveLength(ADMIN_AUTH_FAILURES_PER_WINDOW * 2);
    expect((await ask(gw, ADMIN_TOKEN)).status).toBe(404);
  });
});
