import { ACTIVITY_ACTIONS } from '@svc/contracts';
import { bearer, startGatewayFixture, type GatewayFixture, type TestGateway } from '../../../test/support/test-gateway';
import { count, createOne, guia, moveOn, simulate } from '../../../test/support/shipment-fixtures';
import { listActivity, OPERATOR, recordActivity } from '../src/activity/activity.repository';
import { createActivityRetention } from '../src/activity/activity.retention';
import { createCompany as createCompanyService } from '../src/companies/company.service';

interface Row {
  usuario: string;
  accion: string;
  sucursal_id: string | null;
  webhook_id: string | null;
  detalle: Record<string, unknown> | null;
}

describe('the activity log', () => {
  let fx: GatewayFixture;
  let gw: TestGateway;

  beforeAll(async () => {
    fx = await startGatewayFixture('activity', { env: { RETENTION_DAYS: '7' } });
    gw = fx.gw;
  });
  afterAll(() => fx?.stop());

  const rows = async (empresaId: string): Promise<Row[]> =>
    (await fx.pool.query<Row>('select usuario, accion, sucursal_id, webhook_id, detalle from actividad where empresa_id = $1 order by id', [empresaId])).rows;
  const tableText = async (): Promise<string> => JSON.stringify((await fx.pool.query('select * from actividad')).rows);

  it('records every internal action as the operator\'s, with what it was about, and no token or secret', async () => {
    const created = await gw.admin('post', '/empresas', { nombre: 'Bitácora S.A.', sucursalesHabilitadas: true });
    expect(created.status).toBe(201);
    const id = created.body.data.id as string;
    // Refused actions leave nothing: tokens of an unverified company, credits over the maximum.
    expect((await gw.admin('post', `/empresas/${id}/tokens`)).status).toBe(409);
    expect((await gw.admin('post', `/empresas/${id}/creditos`, { cantidad: 2_000_000_000 })).status).toBe(400);
    expect((await gw.admin('patch', `/empresas/${id}`, { verificada: true, planActivo: true })).status).toBe(200);
    expect((await gw.admin('post', `/empresas/${id}/creditos`, { cantidad: 25 })).status).toBe(200);
    const first = (await gw.admin('post', `/empresas/${id}/tokens`)).body.data as { live: string; test: string };
    const second = (await gw.admin('post', `/empresas/${id}/tokens`)).body.data as { live: string; test: string };
    const sid = (await gw.admin('post', `/empresas/${id}/sucursales`, { nombre: 'Zona 4' })).body.data.id as string;
    const branchTokens = (await gw.admin('post', `/empresas/${id}/sucursales/${sid}/tokens`)).body.data as { live: string; test: string };
    const hook = await gw.admin('post', `/empresas/${id}/sucursales/${sid}/webhooks`, { url: 'https://example.com/zona4' });
    expect(hook.status).toBe(201);
    const webhookId = hook.body.data.id as string;
    const numero = (await createOne(gw, branchTokens.live, guia(1))).body.data.numeroGuia as string;
    expect((await moveOn(gw, numero, { evento: 'GUIA_RECOLECTADA' })).status).toBe(200);
    expect((await moveOn(gw, numero, { evento: 'GUIA_ENTREGADA' })).status).toBe(409); // no row
    expect((await gw.admin('delete', `/empresas/${id}/sucursales/${sid}/tokens`)).status).toBe(200);
    expect((await gw.admin('delete', `/empresas/${id}/tokens`)).status).toBe(200);

    const op = { usuario: OPERATOR, sucursal_id: null, webhook_id: null };
    expect(await rows(id)).toEqual([
      {
        ...op,
        accion: 'company.created',
        detalle: { nombre: 'Bitácora S.A.', sucursalesHabilitadas: true },
      },
      { ...op, accion: 'company.changed', detalle: { verificada: true, planActivo: true } },
      { ...op, accion: 'credits.added', detalle: { cantidad: 25, creditos: 25 } },
      { ...op, accion: 'tokens.generated', detalle: null },
      { ...op, accion: 'tokens.regenerated', detalle: null },
      { ...op, accion: 'branch.created', sucursal_id: sid, detalle: { nombre: 'Zona 4' } },
      { ...op, accion: 'tokens.generated', sucursal_id: sid, detalle: null },
      { ...op, accion: 'webhook.created', sucursal_id: sid, webhook_id: webhookId, detalle: { modo: 'live' } },
      { ...op, accion: 'shipment.event', sucursal_id: sid, detalle: { numeroGuia: numero, evento: 'GUIA_RECOLECTADA', estado: 'RECOLECTADA' } },
      { ...op, accion: 'tokens.deleted', sucursal_id: sid, detalle: { eliminados: 2 } },
      { ...op, accion: 'tokens.deleted', detalle: { eliminados: 2 } },
    ]);
    const text = await tableText();
    for (const secret of [first.live, first.test, second.live, second.test, branchTokens.live, branchTokens.test, hook.body.data.secret as string]) {
      expect(text).not.toContain(secret);
    }
    expect(text).not.toMatch(/svc_(live|test)_|whsec_/);
  });

  it('logs the API token\'s webhook actions as "api"; a sandbox simulation and reads are not actions', async () => {
    const c = await gw.admin('post', '/empresas', { nombre: 'API S.A.', verificada: true, planActivo: true, creditos: 10 });
    const id = c.body.data.id as string;
    const tokens = (await gw.admin('post', `/empresas/${id}/tokens`)).body.data as { live: string; test: string };
    const api = (method: 'post' | 'patch' | 'delete' | 'get', path: string, body?: object) => {
      const r = gw.http[method](`/api/v1${path}`).set('Authorization', bearer(tokens.live));
      return body === undefined ? r : r.send(body);
    };
    const w = (await api('post', '/webhooks', { url: 'https://example.com/api', descripcion: 'ERP' })).body.data as { id: string; secret: string };
    expect((await api('patch', `/webhooks/${w.id}`, { url: 'https://example.com/api?token=receiver-credential', eventos: ['GUIA_CREADA'] })).status).toBe(200);
    expect((await api('patch', `/webhooks/${w.id}`, { activo: false })).status).toBe(200);
    expect((await api('patch', `/webhooks/${w.id}`, { activo: false })).status).toBe(200); // no change, no row
    expect((await api('patch', `/webhooks/${w.id}`, { activo: true, descripcion: null })).status).toBe(200);
    const rotated = (await api('post', `/webhooks/${w.id}/secreto`, { solaparHoras: 2 })).body.data as { secret: string };
    expect((await api('delete', `/webhooks/${w.id}`)).status).toBe(200);
    expect((await api('delete', `/webhooks/${w.id}`)).status).toBe(409); // no row
    expect((await api('get', `/webhooks/${w.id}`)).status).toBe(200);
    const sandbox = (await createOne(gw, tokens.test, guia(2))).body.data.numeroGuia as string;
    expect((await simulate(gw, tokens.test, sandbox, { evento: 'GUIA_RECOLECTADA' })).status).toBe(200);

    const entry = { usuario: 'api', sucursal_id: null, webhook_id: w.id };
    expect((await rows(id)).filter((r) => r.usuario === 'api')).toEqual([
      { ...entry, accion: 'webhook.created', detalle: { modo: 'live' } },
      { ...entry, accion: 'webhook.changed', detalle: { campos: ['url', 'eventos'] } },
      { ...entry, accion: 'webhook.deactivated', detalle: null },
      { ...entry, accion: 'webhook.changed', detalle: { campos: ['descripcion'] } },
      { ...entry, accion: 'webhook.reactivated', detalle: null },
      { ...entry, accion: 'webhook.secret_rotated', detalle: { solaparHoras: 2 } },
      { ...entry, accion: 'webhook.deactivated', detalle: null },
    ]);
    expect((await rows(id)).map((r) => r.accion)).not.toContain('shipment.event');
    const text = await tableText();
    for (const secret of [w.secret, rotated.secret, 'receiver-credential']) expect(text).not.toContain(secret);
  });

  it('is written in the action\'s own transaction: an entry that cannot be written undoes the action', async () => {
    const before = await count(fx.pool, 'select count(*) n from empresas');
    // A `usuario` over 200 characters breaks the log's check: the company is not created either.
    await expect(createCompanyService(gw.deps.db, { nombre: 'Sin rastro' }, 'x'.repeat(201))).rejects.toThrow(/actividad_usuario_check/);
    expect(await count(fx.pool, 'select count(*) n from empresas')).toBe(before);
    // An entry holding something shaped like a token or a secret is refused before it is written.
    const empresaId = (await fx.pool.query<{ id: string }>('select id from empresas limit 1')).rows[0]!.id;
    await expect(recordActivity(gw.deps.db, { empresaId, usuario: OPERATOR, accion: 'company.changed', detalle: { nombre: 'svc_live_abc' } })).rejects.toThrow(/never hold a token or a secret/);
    await expect(recordActivity(gw.deps.db, { empresaId, usuario: OPERATOR, accion: 'webhook.changed', detalle: { campos: ['whsec_x'] } })).rejects.toThrow(/never hold/);
  });

  it('is append-only: updates, deletes and truncation are refused; the retention drops whole days past RETENTION_DAYS', async () => {
    await expect(fx.pool.query(`update actividad set usuario = 'otro'`)).rejects.toThrow(/append-only: UPDATE refused/);
    await expect(fx.pool.query('delete from actividad')).rejects.toThrow(/append-only: DELETE refused/);
    await expect(fx.pool.query('truncate actividad')).rejects.toThrow(/append-only: TRUNCATE refused/);
    const empresaId = (await fx.pool.query<{ id: string }>('select id from empresas limit 1')).rows[0]!.id;
    const total = await count(fx.pool, 'select count(*) n from actividad');
    await fx.pool.query(
      `insert into actividad (empresa_id, usuario, accion, created_at)
       select $1, 'operador', 'company.changed', now() - interval '8 days' from generate_series(1, 120)`,
      [empresaId],
    );
    await fx.pool.query(`insert into actividad (empresa_id, usuario, accion, created_at) values ($1, 'operador', 'company.changed', now() - interval '6 days')`, [empresaId]);
    // Their days have no partitions yet: the DEFAULT partition took them, and the pass first moves
    // them into partitions of their days, then drops the one past RETENTION_DAYS.
    expect(await count(fx.pool, 'select count(*) n from actividad_default')).toBe(121);
    const retention = createActivityRetention({ db: gw.deps.db, logger: gw.deps.logger, retentionDays: 7 });
    expect(await retention.runOnce()).toBe(120);
    expect(await count(fx.pool, 'select count(*) n from actividad_default')).toBe(0);
    expect(await count(fx.pool, 'select count(*) n from actividad')).toBe(total + 1);
    expect(await count(fx.pool, `select count(*) n from actividad where created_at < now() - interval '7 days'`)).toBe(0);
    // The gateway runs the same pass under RETENTION_DAYS.
    expect(await gw.activityRetention.runOnce()).toBe(0);
  });

  it('reads a company\'s log newest first, a page at a time, and refuses a cursor that is not one', async () => {
    const c = await gw.admin('post', '/empresas', { nombre: 'Páginas S.A.' });
    const id = c.body.data.id as string;
    for (let i = 1; i <= 4; i++) expect((await gw.admin('post', `/empresas/${id}/creditos`, { cantidad: i })).status).toBe(200);
    const first = await listActivity(gw.deps.db, id, { limit: 2 });
    expect(first.items.map((e) => e.detalle)).toEqual([
      { cantidad: 4, creditos: 10 },
      { cantidad: 3, creditos: 6 },
    ]);
    expect(first.items[0]).toEqual({ id: expect.any(String), usuario: OPERATOR, accion: 'credits.added', sucursalId: null, webhookId: null, detalle: expect.any(Object), createdAt: expect.any(Date) });
    const second = await listActivity(gw.deps.db, id, { limit: 2, before: first.nextCursor! });
    expect(second.items.map((e) => e.detalle)).toEqual([
      { cantidad: 2, creditos: 3 },
      { cantidad: 1, creditos: 1 },
    ]);
    const last = await listActivity(gw.deps.db, id, { limit: 2, before: second.nextCursor! });
    expect(last).toEqual({ items: [expect.objectContaining({ accion: 'company.created' })], nextCursor: null });
    await expect(listActivity(gw.deps.db, id, { limit: 2, before: "1 or 1=1" })).rejects.toMatchObject({ code: 'VALIDATION_ERROR' });
    // Another company's entries are never on the page.
    expect((await listActivity(gw.deps.db, '00000000-0000-4000-8000-000000000000', { limit: 50 })).items).toEqual([]);
  });

  it('names each action once, from a closed list', () => {
    expect(new Set(ACTIVITY_ACTIONS).size).toBe(ACTIVITY_ACTIONS.length);
    expect(ACTIVITY_ACTIONS).toEqual(expect.arrayContaining(['tokens.generated', 'webhook.secret_rotated', 'deliveries.recovered', 'session.started', 'shipment.event']));
  });
});
