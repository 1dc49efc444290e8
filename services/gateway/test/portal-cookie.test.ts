import { cookieValue } from '../src/portal/portal-session.middleware';
import { issuePortalLink, openPortal } from '../../../test/support/portal-session';
import { createCompany, startGatewayFixture, type Company, type GatewayFixture } from '../../../test/support/test-gateway';


describe('the portal session cookie', () => {
  let fx: GatewayFixture;
  let c: Company;

  beforeAll(async () => {
    fx = await startGatewayFixture('portal-cookie');
    c = await createCompany(fx.gw, { nombre: 'Galletas S.A.' });
  });
  afterAll(() => fx?.stop());

  it('of two same-named cookies, the last (the newest of equal paths) is the one read', async () => {
    expect(cookieValue('svc_portal=planted; other=1; svc_portal=mine', 'svc_portal')).toBe('mine');
    const mine = await openPortal(fx.gw, c.id, 'ana@galletas.gt');
    const theirs = await openPortal(fx.gw, c.id, 'intruso@galletas.gt');
    // A narrower-path cookie is sent first by a browser: it must not win over the portal's own.
    const res = await fx.gw.http.get('/portal/v1/sesion').set('Cookie', `${theirs.cookie}; ${mine.cookie}`);
    expect(res.status).toBe(200);
    expect(res.body.data.usuario).toBe('ana@galletas.gt');
  });

  it('redeeming a new link ends the session the browser still held', async () => {
    const first = await openPortal(fx.gw, c.id, 'beto@galletas.gt');
    expect((await first.get('/sesion')).status).toBe(200);
    const link = await issuePortalLink(fx.gw, c.id, 'beto@galletas.gt');
    const second = await fx.gw.http.post('/portal/v1/sesion').set('Cookie', first.cookie).send({ enlace: link.secret });
    expect(second.status).toBe(201);
    expect((await first.get('/sesion')).status).toBe(401);
    const ended = await fx.pool.query("select count(*)::int n from portal_sesiones where usuario = 'beto@galletas.gt' and terminada_en is not null");
    expect(ended.rows[0].n).toBe(1);
    // A link that does not open leaves the held session alone.
    const held = await openPortal(fx.gw, c.id, 'carla@galletas.gt');
    expect((await fx.gw.http.post('/portal/v1/sesion').set('Cookie', held.cookie).send({ enlace: 'x'.repeat(43) })).status).toBe(401);
    expect((await held.get('/sesion')).status).toBe(200);
  });
});
