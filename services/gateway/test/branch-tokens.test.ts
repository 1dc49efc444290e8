import { eventually } from '../../../test/support/eventually';
import { guia } from '../../../test/support/shipment-fixtures';
import { openPortal } from '../../../test/support/portal-session';
import { bearer, createBranch, createCompany, startGatewayFixture, type Company, type GatewayFixture, type TestGateway } from '../../../test/support/test-gateway';
import { createWebhook } from '../../../test/support/webhook-fixtures';

/**
 * Branch tokens follow their company's `sucursalesHabilitadas`: they stop the moment branches are
 * disabled, on every gateway (each with the principal already cached), and work again when branches
 * are enabled again. The head account can delete a branch's tokens whatever the setting says.
 */
describe('branch tokens follow the branch setting', () => {
  let fx: GatewayFixture;
  let other: TestGateway;
  let c: Company;
  let norte: Company;

  const empresa = (gw: TestGateway, token: string) => gw.http.get('/api/v1/empresa').set('Authorization', bearer(token));
  const credits = async (): Promise<number> => (await fx.gw.admin('get', `/empresas/${c.id}`)).body.data.creditos as number;
  const setBranches = async (on: boolean): Promise<void> => {
    expect((await fx.gw.admin('patch', `/empresas/${c.id}`, { sucursalesHabilitadas: on })).status).toBe(200);
  };

  beforeAll(async () => {
    fx = await startGatewayFixture('branch-tokens');
    other = await fx.addGateway();
    c = await createCompany(fx.gw, { planActivo: true, creditos: 10, sucursalesHabilitadas: true });
    norte = await createBranch(fx.gw, c.id, 'Norte');
  });
  afterAll(() => fx?.stop());

  it('stops at once on every gateway, spends nothing, and works again when enabled', async () => {
    // Both gateways have the branch's principal cached.
    for (const gw of [fx.gw, other]) expect((await empresa(gw, norte.live)).status).toBe(200);

    await setBranches(false);
    for (const gw of [fx.gw, other]) {
      expect((await empresa(gw, norte.live)).status).toBe(401);
      const shipment = await gw.http.post('/api/v1/guias').set('Authorization', bearer(norte.live)).send(guia());
      expect(shipment.status).toBe(401);
    }
    expect(await credits()).toBe(10);
    // The head account's own pair is untouched.
    for (const gw of [fx.gw, other]) expect((await empresa(gw, c.live)).status).toBe(200);

    // Still refused once the caches have been refilled from the database.
    for (const gw of [fx.gw, other]) expect((await empresa(gw, norte.test)).status).toBe(401);

    await setBranches(true);
    expect((await empresa(fx.gw, norte.live)).status).toBe(200);
    // The other gateway drops its cached refusal when the change's message reaches it.
    const works = (token: string) => async () => (await empresa(other, token)).status === 200;
    await eventually(works(norte.live), 5000, 'the branch token works again on the other gateway');
    await eventually(works(norte.test), 5000, 'the branch test token works again on the other gateway');
    const shipment = await other.http.post('/api/v1/guias').set('Authorization', bearer(norte.live)).send(guia());
    expect(shipment.status).toBe(201);
    expect(await credits()).toBe(9);
  });

  it('the head account deletes a branch\'s tokens while branches are disabled', async () => {
    const sur = await createBranch(fx.gw, c.id, 'Sur');
    await setBranches(false);
    const portal = await openPortal(fx.gw, c.id);
    const deleted = await portal.send('delete', `/sucursales/${sur.id}/tokens`);
    expect(deleted.status).toBe(200);
    expect(deleted.body.data).toEqual({ eliminados: 2 });
    // Deleted for good: enabling branches again does not bring them back.
    await setBranches(true);
    expect((await empresa(fx.gw, sur.live)).status).toBe(401);
    const again = await empresa(fx.gw, norte.live);
    expect({ status: again.status, body: again.body }).toEqual({ status: 200, body: expect.anything() });
    // Issuing still needs branches enabled; a branch of another company is still not found.
    await setBranches(false);
    expect((await portal.send('post', `/sucursales/${sur.id}/tokens`)).body.error.code).toBe('SUCURSALES_DESHABILITADAS');
    const stranger = await createCompany(fx.gw, { sucursalesHabilitadas: true });
    const theirs = await createBranch(fx.gw, stranger.id, 'Ajena');
    expect((await portal.send('delete', `/sucursales/${theirs.id}/tokens`)).status).toBe(404);
    await setBranches(true);
  });
});

/**
 * The delivery log's branch rule (a branch reading a company webhook sees only its own events'
 * deliveries, PINGs none) holds wherever a delivery is shown: the webhook's detail and the list's
 * `ultimoDelivery`.
 */
describe('a branch sees no more of a company webhook\'s deliveries than its log shows', () => {
  let fx: GatewayFixture;

  beforeAll(async () => {
    fx = await startGatewayFixture('branch-detail', {
      receiver: true,
      env: { DISPATCH_HOST_MAP: 'receiver.test=127.0.0.1', DISPATCH_ALLOW_CIDRS: '127.0.0.0/8' },
    });
  });
  afterAll(() => fx?.stop());

  it('hides the head account\'s PING from the detail and the list', async () => {
    const c = await createCompany(fx.gw, { sucursalesHabilitadas: true });
    const norte = await createBranch(fx.gw, c.id, 'Norte');
    const hook = await createWebhook(fx.gw, c.live, fx.receiver!.url('/hook'));
    expect((await fx.gw.http.post(`/api/v1/webhooks/${hook.id}/test`).set('Authorization', bearer(c.live))).status).toBe(200);
    const get = (path: string, token: string) => fx.gw.http.get(`/api/v1${path}`).set('Authorization', bearer(token));

    // The head account sees its PING everywhere.
    expect((await get(`/webhooks/${hook.id}`, c.live)).body.data.entregas).toHaveLength(1);
    expect((await get('/webhooks', c.live)).body.data[0].ultimoDelivery).toEqual(expect.objectContaining({ exitoso: true }));

    // The branch: its log is empty, and so are the detail's deliveries and the list's last one.
    expect((await get(`/webhooks/${hook.id}/entregas`, norte.live)).body.data.entregas).toEqual([]);
    const detail = await get(`/webhooks/${hook.id}`, norte.live);
    expect(detail.status).toBe(200);
    expect(detail.body.data.entregas).toEqual([]);
    const list = await get('/webhooks', norte.live);
    expect(list.body.data).toEqual([expect.objectContaining({ id: hook.id, ultimoDelivery: null })]);
  });
});
