import type { Response } from 'supertest';
import { HSTS_MAX_AGE_SECONDS } from '../src/http/cache-control.middleware';
import { openPortal, issuePortalLink, startPortalSession } from '../../../test/support/portal-session';
import { bearer, createBranch, createCompany, startGatewayFixture, type GatewayFixture } from '../../../test/support/test-gateway';

/** The answer, and that it carries what it must not let anyone keep. */
function secretBearing(name: string, res: Response, status: number): void {
  expect({ name, status: res.status, cacheControl: res.headers['cache-control'] }).toEqual({ name, status, cacheControl: 'no-store' });
}

/**
 * Every answer that carries a token, a secret or a session says `Cache-Control: no-store`, on the
 * internal routes, the API and the portal's API; the portal served over TLS also says HSTS.
 */
describe('answers that carry a token, a secret or a session are not stored', () => {
  let fx: GatewayFixture;

  beforeAll(async () => {
    fx = await startGatewayFixture('cache-control', { env: { PORTAL_BASE_URL: 'https://portal.courier.example' } });
  });
  afterAll(() => fx?.stop());

  it('internal routes: a company\'s and a branch\'s tokens, a portal link, a branch webhook\'s secret', async () => {
    const created = await fx.gw.admin('post', '/empresas', { nombre: 'Sin caché', verificada: true, sucursalesHabilitadas: true });
    const id = created.body.data.id as string;
    secretBearing('company tokens', await fx.gw.admin('post', `/empresas/${id}/tokens`), 201);
    const branch = await fx.gw.admin('post', `/empresas/${id}/sucursales`, { nombre: 'Norte' });
    secretBearing('branch tokens', await fx.gw.admin('post', `/empresas/${id}/sucursales/${branch.body.data.id}/tokens`), 201);
    secretBearing('portal link', await fx.gw.admin('post', `/empresas/${id}/portal`, { usuario: 'ana@empresa.gt' }), 201);
    secretBearing(
      'branch webhook',
      await fx.gw.admin('post', `/empresas/${id}/sucursales/${branch.body.data.id}/webhooks`, { url: 'https://hooks.example.com/norte' }),
      201,
    );
  });

  it('API: a webhook\'s secret at creation and at rotation', async () => {
    const c = await createCompany(fx.gw);
    const hook = await fx.gw.http.post('/api/v1/webhooks').set('Authorization', bearer(c.live)).send({ url: 'https://hooks.example.com/a' });
    secretBearing('webhook creation', hook, 201);
    const rotated = await fx.gw.http.post(`/api/v1/webhooks/${hook.body.data.id}/secreto`).set('Authorization', bearer(c.live));
    secretBearing('secret rotation', rotated, 200);
    // Refusals too: nothing of /api/v1 is kept.
    secretBearing('refusal', await fx.gw.http.get('/api/v1/empresa'), 401);
  });

  it('portal: the session, its anti-CSRF token, tokens and webhook secrets; HSTS on the portal, pages included', async () => {
    const c = await createCompany(fx.gw, { sucursalesHabilitadas: true });
    const branch = await createBranch(fx.gw, c.id, 'Sur');
    const link = await issuePortalLink(fx.gw, c.id);
    const started = await startPortalSession(fx.gw, link.secret);
    secretBearing('session start', started, 201);
    expect(started.headers['strict-transport-security']).toBe(`max-age=${HSTS_MAX_AGE_SECONDS}`);
    const portal = await openPortal(fx.gw, c.id);
    secretBearing('session read', await portal.get('/sesion'), 200);
    secretBearing('portal tokens', await portal.send('post', '/tokens'), 201);
    secretBearing('portal branch tokens', await portal.send('post', `/sucursales/${branch.id}/tokens`), 201);
    const hook = await portal.send('post', '/webhooks?modo=live', { url: 'https://hooks.example.com/portal' });
    secretBearing('portal webhook', hook, 201);
    secretBearing('portal rotation', await portal.send('post', `/webhooks/${hook.body.data.id}/secreto?modo=live`), 200);
    const page = await fx.gw.http.get('/portal/');
    expect(page.headers['strict-transport-security']).toBe(`max-age=${HSTS_MAX_AGE_SECONDS}`);
    // The API is not the portal: HSTS there is the proxy's to add.
    expect((await fx.gw.http.get('/api/v1/empresa').set('Authorization', bearer(c.live))).headers['strict-transport-security']).toBeUndefined();
  });
});

describe('a portal on plain HTTP (development) sends no HSTS', () => {
  let fx: GatewayFixture;

  beforeAll(async () => {
    fx = await startGatewayFixture('cache-control-http');
  });
  afterAll(() => fx?.stop());

  it('has no Strict-Transport-Security, and still no-store on the session', async () => {
    const c = await createCompany(fx.gw);
    const started = await startPortalSession(fx.gw, (await issuePortalLink(fx.gw, c.id)).secret);
    secretBearing('session start', started, 201);
    expect(started.headers['strict-transport-security']).toBeUndefined();
  });
});
