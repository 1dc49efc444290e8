import { ACTIVITY_ACTIONS, type Actividad as Entry } from '@svc/contracts';
import { openPortal, type PortalClient } from '../../../test/support/portal-session';
import { bearer, createCompany, startGatewayFixture, type Company, type GatewayFixture, type TestGateway } from '../../../test/support/test-gateway';
import { openApiDocument } from '../src/openapi/openapi.routes';
import { recoverDeliveries, resendDelivery } from '../src/deliveries/delivery.service';

const HOUR = 3600_000;

/**
 * The portal's Actividad (docs/portal.md): every action of the portal in the activity log once, with the
 * link's `usuario`, in the action's own transaction; the API's resends and recoveries as "api"; and
 * `GET /portal/v1/actividad`, newest first, paged, the session's company only.
 */
describe('the portal: Actividad', () => {
  let fx: GatewayFixture;
  let gw: TestGateway;
  let c: Company;
  let other: Company;
  let portal: PortalClient;

  beforeAll(async () => {
    fx = await startGatewayFixture('portal-activity', {
      receiver: true,
      env: { DISPATCH_HOST_MAP: 'receiver.test=127.0.0.1', DISPATCH_ALLOW_CIDRS: '127.0.0.0/8' },
    });
    gw = fx.gw;
    c = await createCompany(gw, { nombre: 'Bitácora del portal', sucursalesHabilitadas: true });
    other = await createCompany(gw, { nombre: 'Otra empresa' });
    portal = await openPortal(gw, c.id, 'ana@bitacora.gt');
  });
  afterAll(() => fx?.stop());

  /** Every entry of the company as the portal's page reads it, following the cursor. */
  async function readAll(client: PortalClient, limit: number): Promise<Entry[]> {
    const all: Entry[] = [];
    let cursor: string | null = null;
    for (let pages = 0; pages < 100; pages++) {
      const res = await client.get(`/actividad?limit=${limit}${cursor ? `&cursor=${cursor}` : ''}`);
      expect(res.status).toBe(200);
      const data = res.body.data as { actividades: Entry[]; nextCursor: string | null };
      expect(data.actividades.length).toBeLessThanOrEqual(limit);
      all.push(...data.actividades);
      cursor = data.nextCursor;
      if (cursor === null) return all;
    }
    throw new Error('the cursor never ended');
  }

  it("logs each portal action once, as the link's usuario, and the API's resends and recoveries as api; the page reads them newest first", async () => {
    const tokens = await portal.send('post', '/tokens');
    expect(tokens.status).toBe(201);
    const live = tokens.body.data.live as string;
    fx.receiver!.respond('/bitacora', { status: 200 });
    const created = await portal.send('post', '/webhooks?modo=live', { url: fx.receiver!.url('/bitacora'), descripcion: 'ERP' });
    expect(created.status).toBe(201);
    const wid = created.body.data.id as string;
    expect((await portal.send('patch', `/webhooks/${wid}?modo=live`, { descripcion: 'ERP central', eventos: ['GUIA_CREADA'] })).status).toBe(200);
    expect((await portal.send('patch', `/webhooks/${wid}?modo=live`, { activo: false })).status).toBe(200);
    expect((await portal.send('patch', `/webhooks/${wid}?modo=live`, { activo: true })).status).toBe(200);
    const rotated = await portal.send('post', `/webhooks/${wid}/secreto?modo=live`, { solaparHoras: 2 });
    expect(rotated.status).toBe(200);
    // A PING is no action of the log; it gives a delivery to resend.
    expect((await portal.send('post', `/webhooks/${wid}/test?modo=live`)).body.data.exitoso).toBe(true);
    const ping = (await portal.get(`/webhooks/${wid}/entregas?modo=live`)).body.data.entregas[0].id as string;
    const resent = await portal.send('post', `/webhooks/${wid}/entregas/${ping}/reenviar?modo=live`);
    expect(resent.status).toBe(202);
    const desde = new Date(Date.now() - HOUR).toISOString();
    expect((await portal.send('post', `/webhooks/${wid}/recuperar?modo=live`, { desde })).body.data).toEqual({ reenviadas: 0, pendientes: 0 });
    // The same two through /api/v1, with the company's live token.
    const api = (path: string, body?: object) => gw.http.post(`/api/v1${path}`).set('Authorization', bearer(live)).send(body);
    const apiResent = await api(`/webhooks/${wid}/entregas/${ping}/reenviar`);
    expect(apiResent.status).toBe(202);
    expect((await api(`/webhooks/${wid}/recuperar`, { desde })).status).toBe(202);
    // A branch's tokens and webhook through the portal.
    const sid = (await gw.admin('post', `/empresas/${c.id}/sucursales`, { nombre: 'Zona 10' })).body.data.id as string;
    expect((await portal.send('post', `/sucursales/${sid}/tokens`)).status).toBe(201);
    const branchHook = await portal.send('post', `/sucursales/${sid}/webhooks`, { url: fx.receiver!.url('/zona10') });
    expect(branchHook.status).toBe(201);
    expect((await portal.send('delete', `/sucursales/${sid}/tokens`)).body.data).toEqual({ eliminados: 2 });
    expect((await portal.send('delete', `/webhooks/${wid}?modo=live`)).status).toBe(200);

    const ana = 'ana@bitacora.gt';
    const hook = { sucursalId: null, webhookId: wid };
    const page = await readAll(portal, 50);
    expect(page.map(({ accion, usuario, sucursalId, webhookId, detalle }) => ({ accion, usuario, sucursalId, webhookId, detalle }))).toEqual(
      [
        { accion: 'company.created', usuario: 'operador', sucursalId: null, webhookId: null, detalle: { nombre: 'Bitácora del portal', sucursalesHabilitadas: true, verificada: true } },
        { accion: 'tokens.generated', usuario: 'operador', sucursalId: null, webhookId: null, detalle: null },
        { accion: 'session.started', usuario: ana, sucursalId: null, webhookId: null, detalle: null },
        { accion: 'tokens.regenerated', usuario: ana, sucursalId: null, webhookId: null, detalle: null },
        { accion: 'webhook.created', usuario: ana, ...hook, detalle: { modo: 'live' } },
        { accion: 'webhook.changed', usuario: ana, ...hook, detalle: { campos: ['eventos', 'descripcion'] } },
        { accion: 'webhook.deactivated', usuario: ana, ...hook, detalle: null },
        { accion: 'webhook.reactivated', usuario: ana, ...hook, detalle: null },
        { accion: 'webhook.secret_rotated', usuario: ana, ...hook, detalle: { solaparHoras: 2 } },
        { accion: 'delivery.resent', usuario: ana, ...hook, detalle: { entregaId: resent.body.data.id, reenvioDe: ping, evento: 'PING' } },
        { accion: 'deliveries.recovered', usuario: ana, ...hook, detalle: { desde, hasta: expect.any(String), reenviadas: 0 } },
        { accion: 'delivery.resent', usuario: 'api', ...hook, detalle: { entregaId: apiResent.body.data.id, reenvioDe: ping, evento: 'PING' } },
        { accion: 'deliveries.recovered', usuario: 'api', ...hook, detalle: { desde, hasta: expect.any(String), reenviadas: 0 } },
        { accion: 'branch.created', usuario: 'operador', sucursalId: sid, webhookId: null, detalle: { nombre: 'Zona 10' } },
        { accion: 'tokens.generated', usuario: ana, sucursalId: sid, webhookId: null, detalle: null },
        { accion: 'webhook.created', usuario: ana, sucursalId: sid, webhookId: branchHook.body.data.id, detalle: { modo: 'live' } },
        { accion: 'tokens.deleted', usuario: ana, sucursalId: sid, webhookId: null, detalle: { eliminados: 2 } },
        { accion: 'webhook.deactivated', usuario: ana, ...hook, detalle: null },
      ].reverse(),
    );
    // Newest first by id, with its time; every page the same entries, whatever its size.
    expect(page.map((e) => BigInt(e.id))).toEqual([...page.map((e) => BigInt(e.id))].sort((x, y) => (x > y ? -1 : x < y ? 1 : 0)));
    for (const e of page) expect(Math.abs(Date.parse(e.createdAt) - Date.now())).toBeLessThan(5 * 60_000);
    expect(await readAll(portal, 4)).toEqual(page);
    expect(await readAll(portal, 1)).toEqual(page);
    // Never a token or a secret, in what is served or what is stored.
    const stored = JSON.stringify((await fx.pool.query('select * from actividad')).rows);
    for (const secret of [live, tokens.body.data.test as string, created.body.data.secret as string, rotated.body.data.secret as string, branchHook.body.data.secret as string]) {
      expect(JSON.stringify(page)).not.toContain(secret);
      expect(stored).not.toContain(secret);
    }
  });

  it("is the session's company only, and its refusals change nothing", async () => {
    const own = await readAll(portal, 50);
    const theirs = await openPortal(gw, other.id, 'beto@otra.gt');
    const seen = await readAll(theirs, 50);
    expect(seen.map((e) => [e.accion, e.usuario])).toEqual([
      ['session.started', 'beto@otra.gt'],
      ['tokens.generated', 'operador'],
      ['company.created', 'operador'],
    ]);
    expect(seen.filter((e) => own.some((o) => o.id === e.id))).toEqual([]);
    // No session, a bad page: refused.
    expect((await gw.http.get('/portal/v1/actividad')).status).toBe(401);
    for (const query of ['cursor=nada', 'cursor=0', 'cursor=99999999999999999999', 'cursor=9223372036854775808', 'limit=0', 'limit=101', 'limit=2&limit=3']) {
      const res = await portal.get(`/actividad?${query}`);
      expect({ query, status: res.status, code: res.body.error?.code }).toEqual({ query, status: 400, code: 'VALIDATION_ERROR' });
    }
    // The largest bigint is a cursor: a page of everything older.
    expect((await portal.get('/actividad?cursor=9223372036854775807')).body.data.actividades).toEqual(own);
    expect(await readAll(portal, 50)).toEqual(own);
  });

  it("is written in the action's own transaction: a refused action leaves no entry, and an entry that cannot be written undoes the action", async () => {
    const w = await portal.send('post', '/webhooks?modo=test', { url: fx.receiver!.url('/tx') });
    const wid = w.body.data.id as string;
    expect((await portal.send('post', `/webhooks/${wid}/test?modo=test`)).status).toBe(200);
    const ping = (await portal.get(`/webhooks/${wid}/entregas?modo=test`)).body.data.entregas[0].id as string;
    const count = async (sql: string, ...args: unknown[]) => Number((await fx.pool.query<{ n: string }>(sql, args)).rows[0]!.n);
    const entries = () => count('select count(*) n from actividad where empresa_id = $1', c.id);
    const deliveries = () => count('select count(*) n from entregas where webhook_id = $1', wid);
    const [entriesBefore, deliveriesBefore] = [await entries(), await deliveries()];

    // Refused: nothing written, in the log or elsewhere.
    expect((await portal.send('patch', `/webhooks/${wid}?modo=test`, { activo: false })).status).toBe(200);
    expect((await portal.send('post', `/webhooks/${wid}/entregas/${ping}/reenviar?modo=test`)).body.error.code).toBe('WEBHOOK_INACTIVE');
    expect((await portal.send('post', `/webhooks/${wid}/recuperar?modo=test`, { desde: new Date(Date.now() - HOUR).toISOString() })).body.error.code).toBe('WEBHOOK_INACTIVE');
    expect(await entries()).toBe(entriesBefore + 1); // the deactivation only
    expect((await portal.send('patch', `/webhooks/${wid}?modo=test`, { activo: true })).status).toBe(200);

    // A `usuario` the log's check refuses (over 200 characters): the resend is not made either.
    const scope = { empresaId: c.id, sucursalId: null, modo: 'test' as const };
    await expect(resendDelivery(gw.deps, scope, wid, ping, 'tx-test', 'x'.repeat(201))).rejects.toThrow(/actividad_usuario_check/);
    await expect(recoverDeliveries(gw.deps, scope, wid, { desde: new Date(Date.now() - HOUR).toISOString() }, new Date(), 'tx-test', 'x'.repeat(201))).rejects.toThrow(/actividad_usuario_check/);
    expect(await deliveries()).toBe(deliveriesBefore);
    expect(await entries()).toBe(entriesBefore + 2);
  });

  it('is described by the public OpenAPI document, with the closed list of actions', () => {
    const paths = openApiDocument.paths as Record<string, { get?: { operationId?: string } }>;
    expect(paths['/portal/v1/actividad']?.get?.operationId).toBe('portalActividad');
    const schema = (openApiDocument.components as { schemas: Record<string, { properties: { accion: { enum: string[] } } }> }).schemas.PortalActividad!;
    expect(schema.properties.accion.enum).toEqual([...ACTIVITY_ACTIONS]);
  });
});
