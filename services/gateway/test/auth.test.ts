import {
  ADMIN_TOKEN,
  bearer,
  createBranch,
  createCompany,
  startGatewayFixture,
  type GatewayFixture,
  type TestGateway,
} from '../../../test/support/test-gateway';
import { testRedisClient } from '../../../test/support/redis-prefix';
import { manualClock } from '../../../test/support/shipment-fixtures';
import { hashToken } from '../src/auth/token';

const envelope401 = { success: false, error: { code: 'AUTH_REQUIRED', message: expect.any(String) } };

describe('authentication of /api/v1', () => {
  let fx: GatewayFixture;
  let a: TestGateway;
  let b: TestGateway;

  beforeAll(async () => {
    fx = await startGatewayFixture('auth');
    a = fx.gw;
    b = await fx.addGateway();
  });
  afterAll(() => fx?.stop());

  it.each([
    ['no header', undefined],
    ['another scheme', 'Basic dXNlcjpwYXNz'],
    ['lower-case scheme with an unknown token', 'bearer svc_live_abc'],
    ['Bearer with nothing', 'Bearer '],
    ['Bearer glued to the token', `Bearer${'svc_live_'}${'z'.repeat(43)}`],
    ['two values after Bearer', `Bearer svc_live_${'x'.repeat(43)} svc_live_${'y'.repeat(43)}`],
    ['a value without a token prefix', 'Bearer not-a-token'],
    ['an unknown live token', `Bearer svc_live_${'x'.repeat(43)}`],
    ['an unknown test token', `Bearer svc_test_${'y'.repeat(43)}`],
  ])('answers 401 AUTH_REQUIRED for %s', async (_name, header) => {
    const req = a.http.get('/api/v1/empresa');
    const res = header === undefined ? await req : await req.set('Authorization', header);
    expect(res.status).toBe(401);
    expect(res.body).toEqual(envelope401);
    expect(res.headers['content-type']).toMatch(/application\/json/);
    expect(res.headers['x-ratelimit-limit']).toBe('100');
  });

  it('answers a live and a test token with the company and its mode', async () => {
    const c = await createCompany(a, { nombre: 'Transportes Quetzal' });
    expect(c.live).toMatch(/^svc_live_[A-Za-z0-9_-]{43,}$/);
    expect(c.test).toMatch(/^svc_test_[A-Za-z0-9_-]{43,}$/);

    const live = await a.http.get('/api/v1/empresa').set('Authorization', bearer(c.live));
    expect(live.status).toBe(200);
    expect(live.body).toEqual({
      success: true,
      data: { id: c.id, nombre: 'Transportes Quetzal', sucursalesHabilitadas: false, sucursal: null, modo: 'live' },
    });
    const test = await a.http.get('/api/v1/empresa').set('Authorization', bearer(c.test));
    expect(test.status).toBe(200);
    expect(test.body.data.modo).toBe('test');
  });

  it('takes the scheme in any case and spaces or tabs around the token (RFC 9110 §11.1)', async () => {
    const c = await createCompany(a);
    for (const header of [`bearer ${c.live}`, `BEARER ${c.live}`, `Bearer   ${c.live}`, `Bearer\t${c.live}`, `Bearer ${c.live}  `]) {
      const res = await a.http.get('/api/v1/empresa').set('Authorization', header);
      expect(res.status).toBe(200);
      expect(res.body.data.id).toBe(c.id);
    }
    const admin = await a.http.get(`/internal/v1/empresas/${c.id}`).set('Authorization', `bearer  ${ADMIN_TOKEN}`);
    expect(admin.status).toBe(200);
  });

  it('answers a branch token with the branch and its company', async () => {
    const c = await createCompany(a, { sucursalesHabilitadas: true });
    const s = await createBranch(a, c.id, 'Zona 10');
    const res = await a.http.get('/api/v1/empresa').set('Authorization', bearer(s.live));
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ id: c.id, sucursal: { id: s.id, nombre: 'Zona 10' }, modo: 'live' });
  });

  it.each(['company', 'branch'] as const)(
    'answers 20 racing regenerations of a %s pair each with 201; the last pair to commit is the one that works',
    async (owner) => {
      const c = await createCompany(a, { sucursalesHabilitadas: true });
      const path = owner === 'company' ? `/empresas/${c.id}/tokens` : `/empresas/${c.id}/sucursales/${(await createBranch(a, c.id)).id}/tokens`;
      const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).admin('post', path)));
      expect(answers.map((r) => r.status)).toEqual(Array(20).fill(201));
      const pairs = answers.map((r) => r.body.data as { live: string; test: string });
      const working = [];
      for (const p of pairs) {
        const live = (await a.http.get('/api/v1/empresa').set('Authorization', bearer(p.live))).status;
        const test = (await b.http.get('/api/v1/empresa').set('Authorization', bearer(p.test))).status;
        expect([live, test].sort()).toEqual(live === 200 ? [200, 200] : [401, 401]); // a pair lives or dies whole
        if (live === 200) working.push(p);
      }
      expect(working).toHaveLength(1);
    },
  );

  it('stops a regenerated token at once on every instance, cache or not', async () => {
    const c = await createCompany(a);
    // Both instances have the old pair cached.
    for (const gw of [a, b]) {
      for (const t of [c.live, c.test]) {
        expect((await gw.http.get('/api/v1/empresa').set('Authorization', bearer(t))).status).toBe(200);
      }
    }
    const rotated = await a.admin('post', `/empresas/${c.id}/tokens`);
    expect(rotated.status).toBe(201);
    const fresh = rotated.body.data as { live: string; test: string };
    expect(fresh.live).not.toBe(c.live);

    // The very next request on the other instance, without waiting for anything.
    for (const gw of [b, a]) {
      for (const t of [c.live, c.test]) {
        const res = await gw.http.get('/api/v1/empresa').set('Authorization', bearer(t));
        expect(res.status).toBe(401);
        expect(res.body).toEqual(envelope401);
      }
      expect((await gw.http.get('/api/v1/empresa').set('Authorization', bearer(fresh.live))).status).toBe(200);
    }
  });

  it('stops a deleted pair at once on every instance', async () => {
    const c = await createCompany(a);
    expect((await b.http.get('/api/v1/empresa').set('Authorization', bearer(c.live))).status).toBe(200);
    expect((await a.admin('delete', `/empresas/${c.id}/tokens`)).status).toBe(200);
    expect((await b.http.get('/api/v1/empresa').set('Authorization', bearer(c.live))).status).toBe(401);
    expect((await a.http.get('/api/v1/empresa').set('Authorization', bearer(c.test))).status).toBe(401);
  });

  it('stops a rotated branch token on every instance, leaving the company pair alone', async () => {
    const c = await createCompany(a, { sucursalesHabilitadas: true });
    const s = await createBranch(a, c.id);
    expect((await b.http.get('/api/v1/empresa').set('Authorization', bearer(s.live))).status).toBe(200);
    expect((await a.admin('post', `/empresas/${c.id}/sucursales/${s.id}/tokens`)).status).toBe(201);
    expect((await b.http.get('/api/v1/empresa').set('Authorization', bearer(s.live))).status).toBe(401);
    expect((await b.http.get('/api/v1/empresa').set('Authorization', bearer(c.live))).status).toBe(200);
  });

  // The contract caches a token's result for 60 seconds: the limit on how long an instance that
  // missed both the rotation's message and its revoked mark (a lost message, a mark gone with Redis)
  // may go on serving a token that is no longer stored.
  it('serves a cached token for 60 s of its own clock and not a moment longer once the token is gone', async () => {
    const clock = manualClock(new Date('2026-11-22T12:00:00.000Z'));
    const late = await fx.addGateway({ clock });
    const c = await createCompany(a);
    const status = async (gw: TestGateway): Promise<number> => (await gw.http.get('/api/v1/empresa').set('Authorization', bearer(c.live))).status;
    expect(await status(late)).toBe(200); // looked up and cached at 12:00:00
    // Gone from Postgres behind every instance's back: no message, no revoked mark.
    expect((await fx.pool.query('delete from tokens where empresa_id = $1', [c.id])).rowCount).toBe(2);
    expect(await status(a)).toBe(401); // an instance without it cached looks it up
    clock.set('2026-11-22T12:00:59.999Z');
    expect(await status(late)).toBe(200); // still the cached answer: the test does reach the cache
    clock.set('2026-11-22T12:01:00.000Z');
    expect(await status(late)).toBe(401);
  });

  it('keeps the revoked mark of a rotated token longer than an instance may cache it (60 s)', async () => {
    const c = await createCompany(a);
    expect((await b.http.get('/api/v1/empresa').set('Authorization', bearer(c.live))).status).toBe(200);
    expect((await a.admin('post', `/empresas/${c.id}/tokens`)).status).toBe(201);
    const redis = testRedisClient();
    try {
      for (const token of [c.live, c.test]) {
        const ttlMs = await redis.pttl(a.deps.tokenCache.revokedKey(hashToken(token)));
        // An entry cached just before the rotation lives 60 s more: the mark must still be there then.
        expect(ttlMs).toBeGreaterThan(60_000);
      }
    } finally {
      redis.disconnect();
    }
  });

  it('never writes a token or the admin token to the logs', async () => {
    const c = await createCompany(a);
    await a.http.get('/api/v1/empresa').set('Authorization', bearer(c.live));
    await a.http.get('/api/v1/empresa').set('Authorization', bearer(`${c.live}x`));
    await a.admin('post', `/empresas/${c.id}/tokens`);
    const text = a.logs.text() + b.logs.text();
    expect(a.logs.lines.length).toBeGreaterThan(3);
    expect(text).not.toContain(c.live);
    expect(text).not.toContain(c.test);
    expect(text).not.toContain('test-admin-token');
    expect(text).not.toMatch(/svc_(live|test)_[A-Za-z0-9_-]{20,}/);
  });
});
