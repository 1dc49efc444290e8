import { createHash } from 'node:crypto';
import { PORTAL_ABSOLUTE_MS, PORTAL_IDLE_MS } from '../src/portal/portal-session.service';
import { issuePortalLink, openPortal, portalClient, startPortalSession, type PortalClient } from '../../../test/support/portal-session';
import { bearer, createCompany, startGatewayFixture, type Company, type GatewayFixture, type TestGateway } from '../../../test/support/test-gateway';

const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex');
const MINUTE = 60_000;

/** A clock the test moves: the gateway reads every session's time from it. */
function movableClock(start = Date.now()) {
  let now = start;
  return { clock: { now: () => new Date(now) }, advance: (ms: number) => (now += ms), at: () => now };
}

describe('the portal: links and sessions (docs/portal.md)', () => {
  let fx: GatewayFixture;
  let gw: TestGateway;
  let c: Company;
  const time = movableClock();

  beforeAll(async () => {
    fx = await startGatewayFixture('portal-sessions', { clock: time.clock, env: { PORTAL_LINK_TTL_SECONDS: '120' } });
    gw = fx.gw;
    c = await createCompany(gw, { nombre: 'Sesiones S.A.' });
  });
  afterAll(() => fx?.stop());

  const cookieOf = (res: { headers: Record<string, unknown> }): string => String(([] as string[]).concat((res.headers['set-cookie'] as string[]) ?? [])[0] ?? '');

  it('issues a single-use link whose secret travels in the fragment and is stored only as its hash', async () => {
    const link = await issuePortalLink(gw, c.id, 'ana@sesiones.gt');
    const url = new URL(link.url);
    expect(url.origin).toBe(`http://localhost:${gw.port}`);
    expect(url.pathname).toBe('/portal/entrar');
    expect(link.secret).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(new Date(link.expiraEn).getTime()).toBe(time.at() + 120_000);
    const rows = await fx.pool.query('select * from portal_enlaces where empresa_id = $1', [c.id]);
    expect(rows.rows).toHaveLength(1);
    expect(rows.rows[0].hash).toBe(sha256(link.secret));
    expect(JSON.stringify(rows.rows)).not.toContain(link.secret);
    expect(rows.rows[0].usuario).toBe('ana@sesiones.gt');
  });

  it('trades the link for a session once: an HttpOnly, SameSite=Strict cookie on /portal, its hash stored, an anti-CSRF token', async () => {
    const link = await issuePortalLink(gw, c.id, 'beto@sesiones.gt');
    const res = await startPortalSession(gw, link.secret);
    expect(res.status).toBe(201);
    const setCookie = cookieOf(res);
    expect(setCookie).toMatch(/^svc_portal=[A-Za-z0-9_-]{43}; /);
    const attrs = setCookie.split('; ').slice(1);
    expect(attrs).toEqual(expect.arrayContaining(['Path=/portal', 'HttpOnly', 'SameSite=Strict', `Max-Age=${PORTAL_ABSOLUTE_MS / 1000}`]));
    // Plain HTTP to 127.0.0.1 (loopback): not Secure, or the browser would drop it.
    expect(attrs).not.toContain('Secure');
    expect(res.body.data).toEqual({
      usuario: 'beto@sesiones.gt',
      expiraEn: new Date(time.at() + PORTAL_ABSOLUTE_MS).toISOString(),
      inactividadSegundos: PORTAL_IDLE_MS / 1000,
      csrfToken: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
      empresa: { id: c.id, nombre: 'Sesiones S.A.', verificada: true, sucursalesHabilitadas: false },
    });
    const secret = setCookie.split(';')[0]!.slice('svc_portal='.length);
    const stored = await fx.pool.query('select hash, usuario from portal_sesiones where hash = $1', [sha256(secret)]);
    expect(stored.rows).toEqual([{ hash: sha256(secret), usuario: 'beto@sesiones.gt' }]);
    // The link is used: a second exchange (another tab, a replay) gets nothing.
    const again = await startPortalSession(gw, link.secret);
    expect(again.status).toBe(401);
    expect(again.body.error.code).toBe('AUTH_REQUIRED');
    expect(cookieOf(again)).toBe('');
    // Neither secret is ever written to the log.
    expect(gw.logs.text()).not.toContain(link.secret);
    expect(gw.logs.text()).not.toContain(secret);
  });

  it('marks the cookie Secure unless the request is plain HTTP to localhost', async () => {
    const link = await issuePortalLink(gw, c.id);
    const res = await gw.http.post('/portal/v1/sesion').set('Host', 'portal.courier.example').send({ enlace: link.secret });
    expect(res.status).toBe(201);
    expect(cookieOf(res).split('; ')).toContain('Secure');
    const local = await gw.http.post('/portal/v1/sesion').set('Host', `localhost:${gw.port}`).send({ enlace: (await issuePortalLink(gw, c.id)).secret });
    expect(cookieOf(local).split('; ')).not.toContain('Secure');
  });

  it('refuses a link after PORTAL_LINK_TTL_SECONDS, and an unknown one', async () => {
    const link = await issuePortalLink(gw, c.id);
    time.advance(121_000);
    const res = await startPortalSession(gw, link.secret);
    expect(res.status).toBe(401);
    expect(res.body.error.message).toMatch(/enlace/);
    expect((await startPortalSession(gw, 'x'.repeat(43))).status).toBe(401);
    // Within its time a link works.
    const fresh = await issuePortalLink(gw, c.id);
    time.advance(119_000);
    expect((await startPortalSession(gw, fresh.secret)).status).toBe(201);
  });

  it('refuses every change without the session’s anti-CSRF token, or from another origin, and changes nothing', async () => {
    const p = await openPortal(gw, c.id);
    const other = await openPortal(gw, c.id);
    const before = await fx.pool.query('select hash from tokens where empresa_id = $1 order by hash', [c.id]);
    for (const csrf of [false, 'not-the-token', other.csrf] as const) {
      const res = await p.send('post', '/tokens', undefined, { csrf });
      expect({ csrf, status: res.status, code: res.body.error?.code }).toEqual({ csrf, status: 403, code: 'FORBIDDEN' });
    }
    const foreign = await p.send('post', '/tokens', undefined, { origin: 'https://evil.example' });
    expect(foreign.status).toBe(403);
    expect((await p.send('post', '/webhooks', { url: 'https://receiver.test/x' }, { csrf: false })).status).toBe(403);
    expect((await p.send('delete', '/sesion', undefined, { csrf: false })).status).toBe(403);
    const after = await fx.pool.query('select hash from tokens where empresa_id = $1 order by hash', [c.id]);
    expect(after.rows).toEqual(before.rows);
    // The old tokens still work: nothing was regenerated.
    expect((await gw.http.get('/api/v1/empresa').set('Authorization', bearer(c.live))).status).toBe(200);
    // Reads need no token; the same change with it and the page's own origin goes through.
    expect((await p.get('/tokens')).status).toBe(200);
    expect((await p.send('post', '/tokens', undefined, { origin: `http://127.0.0.1:${gw.port}` })).status).toBe(201);
    expect((await gw.http.get('/api/v1/empresa').set('Authorization', bearer(c.live))).status).toBe(401);
  });

  it('ends a session after 30 minutes without a request, and clears its cookie', async () => {
    const p = await openPortal(gw, c.id);
    time.advance(PORTAL_IDLE_MS - MINUTE);
    expect((await p.get('/sesion')).status).toBe(200); // used: the 30 minutes start again
    time.advance(PORTAL_IDLE_MS - MINUTE);
    expect((await p.get('/resumen')).status).toBe(200);
    time.advance(PORTAL_IDLE_MS + 1);
    const res = await p.get('/resumen');
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('AUTH_REQUIRED');
    expect(cookieOf(res)).toMatch(/^svc_portal=; .*Max-Age=0/);
    // Used again at once, it stays ended.
    expect((await p.get('/sesion')).status).toBe(401);
  });

  it('ends a session 8 hours after it began, however much it is used', async () => {
    const p = await openPortal(gw, c.id);
    for (let used = 0; used + 20 * MINUTE < PORTAL_ABSOLUTE_MS; used += 20 * MINUTE) {
      time.advance(20 * MINUTE);
      expect((await p.get('/sesion')).status).toBe(200);
    }
    time.advance(20 * MINUTE);
    expect((await p.get('/sesion')).status).toBe(401);
  });

  it('ends every session of the company when the operator says so, and only that company’s', async () => {
    const a = await openPortal(gw, c.id);
    const b = await openPortal(gw, c.id);
    const unused = await issuePortalLink(gw, c.id);
    const d = await createCompany(gw, { nombre: 'Otra' });
    const otherCompany = await openPortal(gw, d.id);
    const ended = await gw.admin('delete', `/empresas/${c.id}/portal`);
    expect(ended.status).toBe(200);
    expect(ended.body.data.sesionesTerminadas).toBeGreaterThanOrEqual(2);
    for (const p of [a, b]) expect((await p.get('/sesion')).status).toBe(401);
    expect((await a.send('post', '/tokens')).status).toBe(401);
    // A link issued before the end opens nothing either.
    expect((await startPortalSession(gw, unused.secret)).status).toBe(401);
    expect((await otherCompany.get('/sesion')).status).toBe(200);
    // A new link opens a new session.
    expect((await (await openPortal(gw, c.id)).get('/sesion')).status).toBe(200);
    expect((await gw.admin('delete', '/empresas/00000000-0000-4000-8000-000000000000/portal')).status).toBe(404);
  });

  it('Cerrar sesión ends the session and clears its cookie', async () => {
    const p = await openPortal(gw, c.id);
    const res = await p.send('delete', '/sesion');
    expect(res.status).toBe(200);
    expect(cookieOf(res)).toMatch(/^svc_portal=; Path=\/portal; Max-Age=0/);
    expect((await p.get('/sesion')).status).toBe(401);
  });

  it('answers without a cookie, or with a made-up one, 401 AUTH_REQUIRED in the envelope', async () => {
    const none = await gw.http.get('/portal/v1/resumen');
    expect(none.status).toBe(401);
    expect(none.body).toEqual({ success: false, error: { code: 'AUTH_REQUIRED', message: expect.any(String) } });
    const madeUp: PortalClient = portalClient(gw, `svc_portal=${'a'.repeat(43)}; Path=/portal`, 'x');
    expect((await madeUp.get('/resumen')).status).toBe(401);
    // An unknown portal route needs a session first, then is 404 NOT_FOUND.
    const p = await openPortal(gw, c.id);
    expect((await p.get('/no-such-page')).status).toBe(404);
  });

  it('rate-limits each session on its own (PORTAL_RATE_LIMIT_PER_MINUTE), with Retry-After', async () => {
    const limited = await fx.addGateway({ env: { PORTAL_RATE_LIMIT_PER_MINUTE: '3' }, clock: time.clock });
    const link = await issuePortalLink(limited, c.id);
    const res = await startPortalSession(limited, link.secret);
    const p = portalClient(limited, cookieOf(res), res.body.data.csrfToken as string);
    for (let i = 0; i < 3; i++) expect((await p.get('/sesion')).status).toBe(200);
    const refused = await p.get('/sesion');
    expect(refused.status).toBe(429);
    expect(refused.body.error.code).toBe('RATE_LIMIT_EXCEEDED');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    // Another session has its own window.
    const other = await startPortalSession(limited, (await issuePortalLink(limited, c.id)).secret);
    expect((await portalClient(limited, cookieOf(other), '').get('/sesion')).status).toBe(200);
  });
});
