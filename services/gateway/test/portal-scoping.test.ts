import { openPortal, type PortalClient } from '../../../test/support/portal-session';
import { guia } from '../../../test/support/shipment-fixtures';
import { bearer, createBranch, createCompany, startGatewayFixture, type Company, type GatewayFixture, type TestGateway } from '../../../test/support/test-gateway';
import { createWebhook } from '../../../test/support/webhook-fixtures';

const NO_ID = '00000000-0000-4000-8000-000000000000';

describe('the portal: a session sees and changes only its own company', () => {
  let fx: GatewayFixture;
  let gw: TestGateway;
  let a: Company;
  let b: Company;
  let pa: PortalClient;
  let pb: PortalClient;
  let bWebhook: string;
  let bDelivery: string;
  let bSandbox: string;
  let bBranch: string;

  beforeAll(async () => {
    fx = await startGatewayFixture('portal-scoping', {
      receiver: true,
      env: { DISPATCH_HOST_MAP: 'receiver.test=127.0.0.1', DISPATCH_ALLOW_CIDRS: '127.0.0.0/8' },
    });
    gw = fx.gw;
    a = await createCompany(gw, { nombre: 'A', sucursalesHabilitadas: true, planActivo: true, creditos: 10 });
    b = await createCompany(gw, { nombre: 'B', sucursalesHabilitadas: true, planActivo: true, creditos: 10 });
    pa = await openPortal(gw, a.id, 'ana@a.gt');
    pb = await openPortal(gw, b.id, 'beto@b.gt');
    bWebhook = (await createWebhook(gw, b.live, fx.receiver!.url('/b'))).id;
    await gw.http.post(`/api/v1/webhooks/${bWebhook}/test`).set('Authorization', bearer(b.live));
    bDelivery = (await pb.get(`/webhooks/${bWebhook}/entregas?modo=live`)).body.data.entregas[0].id as string;
    bSandbox = (await pb.send('post', '/sandbox/guias')).body.data.numeroGuia as string;
    bBranch = (await createBranch(gw, b.id, 'Sucursal de B')).id;
  });
  afterAll(() => fx?.stop());

  it('another company’s webhook, delivery, sandbox shipment and branch are not found, whatever the action', async () => {
    const branchTokensAt = (await pb.get('/sucursales')).body.data[0].tokensGeneradosEn as string;
    expect(branchTokensAt).toEqual(expect.any(String));
    const reads = [
      `/webhooks/${bWebhook}?modo=live`,
      `/webhooks/${bWebhook}/entregas?modo=live`,
      `/webhooks/${bWebhook}/entregas/${bDelivery}?modo=live`,
      `/sandbox/guias/${bSandbox}`,
    ];
    for (const path of reads) expect({ path, status: (await pa.get(path)).status }).toEqual({ path, status: 404 });
    const changes: Array<['post' | 'patch' | 'delete', string, unknown]> = [
      ['patch', `/webhooks/${bWebhook}?modo=live`, { descripcion: 'ajena' }],
      ['patch', `/webhooks/${bWebhook}?modo=live`, { activo: false }],
      ['delete', `/webhooks/${bWebhook}?modo=live`, undefined],
      ['post', `/webhooks/${bWebhook}/test?modo=live`, undefined],
      ['post', `/webhooks/${bWebhook}/secreto?modo=live`, { solaparHoras: 0 }],
      ['post', `/webhooks/${bWebhook}/entregas/${bDelivery}/reenviar?modo=live`, undefined],
      ['post', `/webhooks/${bWebhook}/recuperar?modo=live`, { desde: new Date(Date.now() - 3600_000).toISOString() }],
      ['post', `/sandbox/guias/${bSandbox}/simular`, { evento: 'GUIA_RECOLECTADA' }],
      ['post', `/sucursales/${bBranch}/tokens`, undefined],
      ['delete', `/sucursales/${bBranch}/tokens`, undefined],
      ['post', `/sucursales/${bBranch}/webhooks`, { url: 'https://receiver.test/ajena' }],
    ];
    for (const [method, path, body] of changes) {
      const res = await pa.send(method, path, body);
      expect({ method, path, status: res.status, code: res.body.error?.code }).toEqual({ method, path, status: 404, code: 'NOT_FOUND' });
    }
    // B's webhook is as it was, its shipment unmoved, its branch's tokens those it had.
    const w = await pb.get(`/webhooks/${bWebhook}?modo=live`);
    expect(w.body.data).toMatchObject({ activo: true, descripcion: null });
    expect((await pb.get(`/sandbox/guias/${bSandbox}`)).body.data.estado).toBe('CREADA');
    expect((await pb.get('/sucursales')).body.data[0].tokensGeneradosEn).toBe(branchTokensAt);
    expect((await pa.get(`/webhooks/${NO_ID}?modo=live`)).status).toBe(404);
    // Refused, so in nobody's activity log: B's holds only what B's own people and the operator did.
    const bLog = await fx.pool.query<{ usuario: string }>('select usuario from actividad where empresa_id = $1', [b.id]);
    expect(new Set(bLog.rows.map((r) => r.usuario))).toEqual(new Set(['operador', 'beto@b.gt', 'api']));
    expect((await pb.get('/actividad')).body.data.actividades.every((e: { usuario: string }) => e.usuario !== 'ana@a.gt')).toBe(true);
  });

  it('lists only its own company’s webhooks, sandbox shipments and branches', async () => {
    expect((await pa.get('/webhooks?modo=live')).body.data).toEqual([]);
    expect((await pb.get('/webhooks?modo=live')).body.data.map((w: { id: string }) => w.id)).toEqual([bWebhook]);
    expect((await pa.get('/sandbox/guias')).body.data.guias).toEqual([]);
    expect((await pa.get('/sucursales')).body.data).toEqual([]);
    expect((await pa.get('/resumen')).body.data.empresa.id).toBe(a.id);
    expect((await pa.get('/sesion')).body.data.empresa.nombre).toBe('A');
  });

  it('regenerates only its own tokens, through the same code path as the internal route: the old pair stops at once on every gateway', async () => {
    const other = await fx.addGateway();
    // Both gateways know A's and B's live tokens (cached for 60 s).
    for (const g of [gw, other]) for (const t of [a.live, b.live]) expect((await g.http.get('/api/v1/empresa').set('Authorization', bearer(t))).status).toBe(200);
    const res = await pa.send('post', '/tokens');
    expect(res.status).toBe(201);
    const { live, test } = res.body.data as { live: string; test: string };
    expect(live).toMatch(/^svc_live_/);
    expect(test).toMatch(/^svc_test_/);
    for (const g of [gw, other]) {
      expect((await g.http.get('/api/v1/empresa').set('Authorization', bearer(a.live))).status).toBe(401);
      expect((await g.http.get('/api/v1/empresa').set('Authorization', bearer(live))).body.data.id).toBe(a.id);
      // B's are untouched.
      expect((await g.http.get('/api/v1/empresa').set('Authorization', bearer(b.live))).status).toBe(200);
    }
    // Deleted likewise.
    expect((await pa.send('delete', '/tokens')).body.data).toEqual({ eliminados: 2 });
    expect((await other.http.get('/api/v1/empresa').set('Authorization', bearer(live))).status).toBe(401);
  });

  it('a branch’s tokens and webhook: generated for that branch, its events reaching the branch’s webhook', async () => {
    const branch = await createBranch(gw, a.id, 'Zona 10');
    const tokens = await pa.send('post', `/sucursales/${branch.id}/tokens`);
    expect(tokens.status).toBe(201);
    const branchLive = tokens.body.data.live as string;
    expect((await gw.http.get('/api/v1/empresa').set('Authorization', bearer(branchLive))).body.data.sucursal).toEqual({ id: branch.id, nombre: 'Zona 10' });
    expect((await gw.http.get('/api/v1/empresa').set('Authorization', bearer(branch.live))).status).toBe(401);
    const hook = await pa.send('post', `/sucursales/${branch.id}/webhooks`, { url: fx.receiver!.url('/branch-a') });
    expect(hook.status).toBe(201);
    const rows = await fx.pool.query('select sucursal_id, modo from webhooks where id = $1', [hook.body.data.id]);
    expect(rows.rows).toEqual([{ sucursal_id: branch.id, modo: 'live' }]);
    const listed = (await pa.get('/sucursales')).body.data.find((s: { id: string }) => s.id === branch.id);
    expect(listed.webhooks.map((w: { id: string }) => w.id)).toEqual([hook.body.data.id]);
    expect(listed.tokensGeneradosEn).toEqual(expect.any(String));
    // The company's own list keeps branch webhooks out.
    expect((await pa.get('/webhooks?modo=live')).body.data.map((w: { id: string }) => w.id)).not.toContain(hook.body.data.id);
    // A company without branches enabled: 409, and no branch token.
    const plain = await createCompany(gw, { nombre: 'Sin sucursales' });
    const pp = await openPortal(gw, plain.id);
    expect((await pp.get('/sucursales')).body.error.code).toBe('SUCURSALES_DESHABILITADAS');
    expect((await pp.send('post', `/sucursales/${branch.id}/tokens`)).status).toBe(409);
  });

  it('the sandbox: a test shipment, moved on, never touching credits or the daily limit', async () => {
    const before = (await pa.get('/resumen')).body.data.empresa;
    const created = await pa.send('post', '/sandbox/guias');
    expect(created.status).toBe(201);
    const numero = created.body.data.numeroGuia as string;
    const row = await fx.pool.query('select modo, empresa_id, sucursal_id from guias where numero_guia = $1', [numero]);
    expect(row.rows).toEqual([{ modo: 'test', empresa_id: a.id, sucursal_id: null }]);
    expect((await pa.send('post', `/sandbox/guias/${numero}/simular`, { evento: 'GUIA_DEVOLUCION' })).status).toBe(400); // motivo required
    expect((await pa.send('post', `/sandbox/guias/${numero}/simular`, { evento: 'GUIA_EN_RUTA' })).body.error.code).toBe('INVALID_TRANSITION');
    expect((await pa.send('post', `/sandbox/guias/${numero}/simular`, { evento: 'GUIA_RECOLECTADA' })).body.data).toEqual({ numeroGuia: numero, estado: 'RECOLECTADA' });
    const page = await pa.get(`/sandbox/guias/${numero}`);
    expect(page.body.data.historial.map((h: { evento: string }) => h.evento)).toEqual(['GUIA_CREADA', 'GUIA_RECOLECTADA']);
    expect(page.body.data.eventosPermitidos.sort()).toEqual(['GUIA_ACTUALIZADA', 'GUIA_ANULADA', 'GUIA_EN_BODEGA'].sort());
    const after = (await pa.get('/resumen')).body.data.empresa;
    expect({ creditos: after.creditos, guiasHoy: after.guiasHoy }).toEqual({ creditos: before.creditos, guiasHoy: before.guiasHoy });
    // A live shipment is not the sandbox's: not found there.
    const t = await pa.send('post', '/tokens');
    const live = await gw.http.post('/api/v1/guias').set('Authorization', bearer(t.body.data.live as string)).send(guia(1));
    expect(live.status).toBe(201);
    expect((await pa.get(`/sandbox/guias/${live.body.data.numeroGuia as string}`)).status).toBe(404);
  });

  it('puts every action in its own company’s activity log with the link’s usuario, never a token or a secret', async () => {
    const created = await pa.send('post', '/webhooks?modo=test', { url: fx.receiver!.url('/actividad') });
    expect(created.status).toBe(201);
    const rotated = await pa.send('post', `/webhooks/${created.body.data.id as string}/secreto?modo=test`, {});
    expect(rotated.status).toBe(200);
    const rows = await fx.pool.query<{ usuario: string; accion: string }>('select usuario, accion from actividad where empresa_id = $1 and usuario <> $2', [a.id, 'operador']);
    expect(rows.rows.map((r) => r.accion)).toEqual(expect.arrayContaining(['session.started', 'tokens.regenerated', 'webhook.created', 'webhook.secret_rotated']));
    expect(new Set(rows.rows.map((r) => r.usuario))).toEqual(new Set(['ana@a.gt']));
    const table = JSON.stringify((await fx.pool.query('select * from actividad')).rows);
    for (const secret of [created.body.data.secret as string, rotated.body.data.secret as string]) expect(table).not.toContain(secret);
    expect(table).not.toMatch(/svc_(live|test)_|whsec_/);
  });
});
