import { createBatch, guia } from '../../../test/support/shipment-fixtures';
import { eventually } from '../../../test/support/eventually';
import { bearer, createBranch, createCompany, type Company } from '../../../test/support/test-gateway';
import { startDispatcherFixture, type DispatcherFixture } from '../../../test/support/test-dispatcher';
import type { EntregaDetalle } from '../../../test/support/webhook-fixtures';

const envelope = (code: string) => ({ success: false, error: { code, message: expect.any(String) } });

describe('the delivery log (GET /api/v1/webhooks/{id}/entregas[/{entregaId}])', () => {
  let fx: DispatcherFixture;
  let c: Company;
  let flakyId: string;

  const get = (path: string, token = c.live) => fx.gw.http.get(`/api/v1${path}`).set('Authorization', bearer(token));
  const log = async (webhookId: string, query = '', token = c.live): Promise<{ entregas: EntregaDetalle[]; nextCursor: string | null }> => {
    const res = await get(`/webhooks/${webhookId}/entregas${query}`, token);
    expect(res.status).toBe(200);
    return res.body.data as { entregas: EntregaDetalle[]; nextCursor: string | null };
  };

  /** The dispatcher starts with the first test that needs one (any of them, when run alone). */
  let started: Promise<unknown> | undefined;
  const dispatching = async (): Promise<void> => {
    await (started ??= fx.addDispatcher());
  };

  beforeAll(async () => {
    // The gateway sends PINGs: it reaches the loopback receiver as the dispatchers do.
    fx = await startDispatcherFixture('deliverylog', {
      dispatchers: 0,
      gateway: { env: { DISPATCH_HOST_MAP: 'receiver.test=127.0.0.1', DISPATCH_ALLOW_CIDRS: '127.0.0.0/8' } },
    });
    c = await createCompany(fx.gw, { planActivo: true, creditos: 100, sucursalesHabilitadas: true });
    fx.receiver.respond('/flaky', [{ status: 500, body: 'kaputt' }, { status: 503, body: 'later' }, { status: 200, body: 'gracias' }]);
    const hook = await get('/webhooks').send(); // warm the token
    expect(hook.status).toBe(200);
    const created = await fx.gw.http.post('/api/v1/webhooks').set('Authorization', bearer(c.live)).send({ url: fx.receiver.url('/flaky') });
    expect(created.status).toBe(201);
    flakyId = created.body.data.id as string;
  });
  afterAll(() => fx?.stop());

  it('gives every attempt with its time, duration, status, reason and answer', async () => {
    const res = await createBatch(fx.gw, c.live, [guia(1)]);
    expect(res.status).toBe(201);
    const numeroGuia = res.body.data.guias[0].numeroGuia as string;
    await dispatching();
    const done = await eventually(
      async () => (await log(flakyId)).entregas[0]?.estado === 'exitosa',
      15_000,
      'delivered after two failures',
    );
    expect(done).toBeGreaterThanOrEqual(0);
    const [d] = (await log(flakyId)).entregas;
    const event = await fx.pool.query<{ id: string }>('select id from outbox where data ->> $1 = $2', ['numeroGuia', numeroGuia]);
    expect(d).toMatchObject({
      evento: 'GUIA_CREADA',
      exitoso: true,
      statusCode: 200,
      intentos: 3,
      estado: 'exitosa',
      eventoId: event.rows[0]!.id,
      numeroGuia,
      reenvioDe: null,
    });
    expect(Object.keys(d!).sort()).toEqual(
      ['createdAt', 'estado', 'evento', 'eventoId', 'exitoso', 'id', 'intentos', 'intentosDetalle', 'numeroGuia', 'reenvioDe', 'statusCode', 'ultimoIntentoEn'].sort(),
    );
    expect(d!.intentosDetalle.map((a) => [a.numero, a.statusCode, a.error, a.mensaje, a.respuesta])).toEqual([
      [1, 500, 'HTTP_STATUS', 'the receiver answered 500 Internal Server Error', 'kaputt'],
      [2, 503, 'HTTP_STATUS', 'the receiver answered 503 Service Unavailable', 'later'],
      [3, 200, null, null, 'gracias'],
    ]);
    const fechas = d!.intentosDetalle.map((a) => Date.parse(a.fecha));
    expect(fechas[1]! - fechas[0]!).toBeGreaterThanOrEqual(900); // 1 s after the first ended
    expect(fechas[2]! - fechas[1]!).toBeGreaterThanOrEqual(1900); // 2 s after the second ended
    for (const a of d!.intentosDetalle) expect(Number.isInteger(a.duracionMs) && a.duracionMs >= 0).toBe(true);
    expect(d!.ultimoIntentoEn).toBe(d!.intentosDetalle[2]!.fecha);

    // The one-delivery route answers the same, and the contract's detail keeps exactly its fields.
    const one = await get(`/webhooks/${flakyId}/entregas/${d!.id}`);
    expect(one.status).toBe(200);
    expect(one.body.data).toEqual(d);
    const detail = await get(`/webhooks/${flakyId}`);
    expect(Object.keys(detail.body.data.entregas[0]).sort()).toEqual(['createdAt', 'evento', 'exitoso', 'id', 'intentos', 'statusCode', 'ultimoIntentoEn']);
  }, 30_000);

  it('lists a delivery once its first attempt has ended: sent first, then recorded with that attempt', async () => {
    await dispatching();
    fx.receiver.respond('/slow', { status: 200, delayMs: 1500 });
    const slow = await fx.gw.http.post('/api/v1/webhooks').set('Authorization', bearer(c.live)).send({ url: fx.receiver.url('/slow'), eventos: ['GUIA_ANULADA'] });
    const id = slow.body.data.id as string;
    const created = await createBatch(fx.gw, c.live, [guia(9)]);
    const numeroGuia = created.body.data.guias[0].numeroGuia as string;
    expect((await fx.gw.admin('post', `/guias/${numeroGuia}/eventos`, { evento: 'GUIA_ANULADA' })).status).toBe(200);
    await fx.receiver.waitFor(1, 5_000, '/slow');
    // In flight: the delivery is written with its first attempt's outcome, in one insert (issue 16).
    expect((await log(id)).entregas).toEqual([]);
    await eventually(async () => (await log(id)).entregas.length === 1, 5_000, 'listed once answered');
    const [d] = (await log(id)).entregas;
    expect(d).toMatchObject({ evento: 'GUIA_ANULADA', estado: 'exitosa', exitoso: true, intentos: 1, statusCode: 200, numeroGuia });
    expect(d!.intentosDetalle).toHaveLength(1);
  }, 15_000);

  it.each([
    ['CONNECTION', 'https://receiver.test:9/nobody', /ECONNREFUSED/],
    ['DNS', 'https://nowhere.invalid/hook', /^cannot resolve nowhere\.invalid: /],
  ])('records a PING as a delivery with one attempt and its reason (%s)', async (error, url, mensaje) => {
    const dead = await fx.gw.http.post('/api/v1/webhooks').set('Authorization', bearer(c.live)).send({ url });
    const id = dead.body.data.id as string;
    const ping = await fx.gw.http.post(`/api/v1/webhooks/${id}/test`).set('Authorization', bearer(c.live));
    expect(ping.body.data).toEqual({ exitoso: false, statusCode: 0, durationMs: expect.any(Number) });
    const [d] = (await log(id)).entregas;
    expect(d).toMatchObject({ evento: 'PING', estado: 'fallida', intentos: 1, eventoId: d!.id, numeroGuia: null, reenvioDe: null });
    expect(d!.intentosDetalle).toEqual([
      { numero: 1, fecha: d!.ultimoIntentoEn, statusCode: 0, duracionMs: expect.any(Number), error, mensaje: expect.stringMatching(mensaje), respuesta: null },
    ]);
    // Deactivated, it leaves the 10-active limit to the rest of the file.
    expect((await fx.gw.http.delete(`/api/v1/webhooks/${id}`).set('Authorization', bearer(c.live))).status).toBe(200);
  });

  it('filters by estado, exitoso, evento and createdAt, and pages with an opaque cursor', async () => {
    await dispatching();
    fx.receiver.respond('/ok', { status: 200 });
    const ok = await fx.gw.http.post('/api/v1/webhooks').set('Authorization', bearer(c.live)).send({ url: fx.receiver.url('/ok') });
    const id = ok.body.data.id as string;
    expect((await createBatch(fx.gw, c.live, [guia(1), guia(2), guia(3), guia(4), guia(5)])).status).toBe(201);
    await fx.gw.http.post(`/api/v1/webhooks/${id}/test`).set('Authorization', bearer(c.live));
    await eventually(async () => (await log(id, '?estado=exitosa')).entregas.length === 6, 10_000, 'six delivered');

    const all: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page: { entregas: EntregaDetalle[]; nextCursor: string | null } = await log(id, `?limit=4${cursor ? `&cursor=${cursor}` : ''}`);
      all.push(...page.entregas.map((e) => e.id));
      cursor = page.nextCursor;
      pages++;
    } while (cursor);
    expect(pages).toBe(2);
    expect(new Set(all).size).toBe(6);
    const newestFirst = (await log(id)).entregas;
    expect(newestFirst.map((e) => e.id)).toEqual(all);
    expect([...newestFirst].sort((a, b) => (a.createdAt < b.createdAt ? 1 : -1)).map((e) => e.createdAt)).toEqual(newestFirst.map((e) => e.createdAt));

    expect((await log(id, '?evento=PING')).entregas.map((e) => e.evento)).toEqual(['PING']);
    expect((await log(id, '?evento=GUIA_CREADA&exitoso=true')).entregas).toHaveLength(5);
    expect((await log(id, '?exitoso=false')).entregas).toHaveLength(0);
    expect((await log(id, '?estado=fallida')).entregas).toHaveLength(0);
    const oldest = newestFirst[newestFirst.length - 1]!;
    expect((await log(id, `?desde=${encodeURIComponent(oldest.createdAt)}`)).entregas).toHaveLength(6);
    expect((await log(id, `?hasta=${encodeURIComponent(oldest.createdAt)}`)).entregas).toHaveLength(0);
    expect((await log(id, '?desde=2000-01-01&hasta=2001-01-01')).entregas).toHaveLength(0);
  }, 20_000);

  it.each([
    ['limit=0'],
    ['limit=101'],
    ['limit=x'],
    ['estado=perdida'],
    ['exitoso=yes'],
    ['evento=GUIA_PERDIDA'],
    ['desde=ayer'],
    ['hasta=2026-13-45T00:00:00Z'],
    ['desde=2026-11-02&hasta=2026-11-01'],
    ['cursor=not-a-cursor'],
    ['estado=exitosa&estado=fallida'],
  ])('400 VALIDATION_ERROR for %s', async (query) => {
    const res = await get(`/webhooks/${flakyId}/entregas?${query}`);
    expect(res.status).toBe(400);
    expect(res.body).toEqual(envelope('VALIDATION_ERROR'));
  });

  it('is readable where the webhook detail is, and 404 elsewhere', async () => {
    const branch = await createBranch(fx.gw, c.id);
    expect((await get(`/webhooks/${flakyId}/entregas`, branch.live)).status).toBe(200);
    const other = await createCompany(fx.gw);
    const [d] = (await log(flakyId)).entregas;
    for (const [path, token] of [
      [`/webhooks/${flakyId}/entregas`, other.live],
      [`/webhooks/${flakyId}/entregas/${d!.id}`, other.live],
      [`/webhooks/00000000-0000-4000-8000-000000000000/entregas`, c.live],
      [`/webhooks/${flakyId}/entregas/00000000-0000-4000-8000-000000000000`, c.live],
      [`/webhooks/${flakyId}/entregas/not-a-uuid`, c.live],
    ] as const) {
      const res = await get(path, token);
      expect({ path, status: res.status, body: res.body }).toEqual({ path, status: 404, body: envelope('NOT_FOUND') });
    }
    // Another webhook's delivery through this webhook's path.
    const ping = await fx.pool.query<{ id: string }>(`select id from entregas where evento = 'PING' limit 1`);
    expect((await get(`/webhooks/${flakyId}/entregas/${ping.rows[0]!.id}`)).status).toBe(404);
  });
});
