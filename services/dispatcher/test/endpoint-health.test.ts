import type pg from 'pg';
import { verify } from '@svc/webhook-signature';
import type { ReceivedRequest } from '../../../test/support/https-receiver';
import { guia } from '../../../test/support/shipment-fixtures';
import { bearer, createCompany, type Company } from '../../../test/support/test-gateway';
import { startDispatcherFixture, type DispatcherFixture } from '../../../test/support/test-dispatcher';
import { eventually, sleep } from '../../../test/support/eventually';

/**
 * Endpoint health and automatic deactivation (extensions.md), caused against real receivers: a
 * receiver answering 500 or 410, one that recovers, and the notices that follow, each verified
 * with its secret as a receiver would.
 */

const OPERATOR_SECRET = 'operator-notify-secret-for-tests-0123456789';
const NOTICES = ['WEBHOOK_FALLANDO', 'WEBHOOK_DESACTIVADO'];
const funded = { planActivo: true, creditos: 10_000 };

interface Hook {
  id: string;
  secret: string;
}

function helpers(fx: DispatcherFixture) {
  const { gw } = fx;
  const api = (method: 'get' | 'post' | 'patch' | 'delete', path: string, token: string, body?: unknown) => {
    const r = gw.http[method](`/api/v1${path}`).set('Authorization', bearer(token));
    return body === undefined ? r : r.send(body as object);
  };
  const hook = async (c: Company, path: string, eventos: string[] = []): Promise<Hook> => {
    const res = await api('post', '/webhooks', c.live, { url: fx.receiver.url(path), eventos });
    if (res.status !== 201) throw new Error(`${res.status} ${JSON.stringify(res.body)}`);
    return res.body.data as Hook;
  };
  const ship = async (c: Company): Promise<string> => {
    const res = await api('post', '/guias', c.live, guia());
    if (res.status !== 201) throw new Error(`${res.status} ${JSON.stringify(res.body)}`);
    return res.body.data.numeroGuia as string;
  };
  const salud = async (c: Company, id: string) => {
    const res = await api('get', `/webhooks/${id}/salud`, c.live);
    if (res.status !== 200) throw new Error(`${res.status} ${JSON.stringify(res.body)}`);
    return res.body.data as {
      estado: string;
      desde: string | null;
      ultimoExito: string | null;
      fallasConsecutivas: number;
      ultimas24h: { exitosas: number; fallidas: number; pendientes: number };
      desactivacion: { fecha: string; por: string; motivo: string | null } | null;
    };
  };
  const active = async (id: string): Promise<boolean> => (await fx.pool.query<{ activo: boolean }>('select activo from webhooks where id = $1', [id])).rows[0]!.activo;
  /** Ships one event every `everyMs` until `done` holds (or `timeoutMs`): a stream, as a company's traffic. */
  const shipUntil = async (c: Company, done: () => Promise<boolean>, everyMs: number, timeoutMs: number): Promise<number> => {
    const until = Date.now() + timeoutMs;
    let n = 0;
    while (!(await done())) {
      if (Date.now() > until) throw new Error(`not done after ${timeoutMs} ms and ${n} events`);
      await ship(c);
      n++;
      await sleep(everyMs);
    }
    return n;
  };
  const noticesIn = (requests: readonly ReceivedRequest[]) => requests.filter((r) => NOTICES.includes(String(r.headers['x-svc-event'])));
  const bodyOf = (r: ReceivedRequest) => JSON.parse(r.rawBody.toString('utf8')) as { event: string; timestamp: string; webhookId?: string; empresaId?: string; data: Record<string, unknown> };
  return { api, hook, ship, salud, active, shipUntil, noticesIn, bodyOf };
}

const pendingOf = async (pool: pg.Pool, webhookId: string): Promise<number> =>
  Number((await pool.query<{ n: string }>(`select count(*) n from entregas where webhook_id = $1 and estado = 'pendiente'`, [webhookId])).rows[0]!.n);

describe('automatic deactivation: a window of a few seconds (WEBHOOK_DISABLE_AFTER_HOURS=0.002, MIN_FAILURES=3)', () => {
  let fx: DispatcherFixture;
  let h: ReturnType<typeof helpers>;

  beforeAll(async () => {
    fx = await startDispatcherFixture('endpoint-health', { dispatchers: 0 });
    await fx.addDispatcher({
      env: {
        WEBHOOK_DISABLE_AFTER_HOURS: '0.002',
        WEBHOOK_DISABLE_MIN_FAILURES: '3',
        OPERATOR_NOTIFY_URL: fx.receiver.url('/operator'),
        OPERATOR_NOTIFY_SECRET: OPERATOR_SECRET,
      },
    });
    h = helpers(fx);
  });
  afterAll(() => fx?.stop());

  it('a receiver answering 500 is deactivated after the window (FALLAS_CONTINUAS): pending deliveries end fallida, notices signed, never to the empty-eventos webhook, the operator told', async () => {
    const c = await createCompany(fx.gw, funded);
    fx.receiver.respond('/dead', { status: 500 });
    const dead = await h.hook(c, '/dead');
    const watcher = await h.hook(c, '/watcher', ['WEBHOOK_FALLANDO', 'WEBHOOK_DESACTIVADO', 'GUIA_ENTREGADA']);
    const everything = await h.hook(c, '/everything');
    const started = Date.now();

    await h.shipUntil(c, async () => !(await h.active(dead.id)), 700, 40_000);
    const took = Date.now() - started;
    // Not before the window (7.2 s) has passed since the first failure ended (about 3 s in).
    expect(took).toBeGreaterThan(7200);

    const s = await h.salud(c, dead.id);
    expect(s).toMatchObject({ estado: 'desactivado', desactivacion: { por: 'sistema', motivo: 'FALLAS_CONTINUAS' }, ultimoExito: null });
    expect(s.fallasConsecutivas).toBeGreaterThanOrEqual(3);
    expect(s.desde).toBe(s.desactivacion!.fecha);

    // Exactly as DELETE: its pending deliveries end fallida without another attempt.
    await eventually(async () => (await pendingOf(fx.pool, dead.id)) === 0, 15_000, 'no pending delivery left to the deactivated webhook');
    const attemptsAtEnd = fx.receiver.requestsTo('/dead').length;
    await sleep(1500);
    expect(fx.receiver.requestsTo('/dead')).toHaveLength(attemptsAtEnd);

    // The activity log says the platform did it; the metric counts it.
    const log = await fx.pool.query<{ usuario: string; detalle: { motivo: string } }>(`select usuario, detalle from actividad where webhook_id = $1 and accion = 'webhook.deactivated'`, [dead.id]);
    expect(log.rows).toEqual([{ usuario: 'sistema', detalle: { motivo: 'FALLAS_CONTINUAS' } }]);
    const metrics = await fx.dispatcher.metrics.registry.getSingleMetricAsString('svc_webhooks_auto_disabled_total');
    expect(metrics).toMatch(/svc_webhooks_auto_disabled_total\{motivo="FALLAS_CONTINUAS"[^}]*\} [1-9]/);

    // The watcher gets WEBHOOK_FALLANDO (3 failures in) and WEBHOOK_DESACTIVADO, signed, no sequence.
    await fx.receiver.waitFor(2, 15_000, '/watcher');
    const notices = h.noticesIn(fx.receiver.requestsTo('/watcher'));
    expect(notices.map((r) => r.headers['x-svc-event'])).toEqual(['WEBHOOK_FALLANDO', 'WEBHOOK_DESACTIVADO']);
    for (const r of notices) {
      expect(verify(r.rawBody, r.headers['x-svc-signature'], watcher.secret)).toBe(true);
      expect(r.headers['x-svc-secuencia']).toBeUndefined();
      const body = h.bodyOf(r);
      expect(Object.keys(body.data).sort()).toEqual(['desde', 'fallasConsecutivas', 'motivo', 'webhook']);
      expect(body.data.webhook).toEqual({ id: dead.id, url: fx.receiver.url('/dead'), descripcion: null });
    }
    const [failing, disabled] = notices.map(h.bodyOf);
    expect(failing!.data).toMatchObject({ motivo: null, fallasConsecutivas: 3 });
    expect(disabled!.data).toMatchObject({ motivo: 'FALLAS_CONTINUAS', desde: expect.any(String) });
    expect(disabled!.data.fallasConsecutivas).toBeGreaterThanOrEqual(3);
    // Recorded in the watcher's delivery log as any delivery.
    const logged = await fx.pool.query<{ evento: string; estado: string }>(`select evento, estado from entregas where webhook_id = $1 and evento like 'WEBHOOK_%' order by created_at`, [watcher.id]);
    expect(logged.rows).toEqual([
      { evento: 'WEBHOOK_FALLANDO', estado: 'exitosa' },
      { evento: 'WEBHOOK_DESACTIVADO', estado: 'exitosa' },
    ]);
    // An empty eventos list means every shipment event, never a notice; the dead webhook gets none of its own.
    expect(h.noticesIn(fx.receiver.requestsTo('/everything'))).toEqual([]);
    expect(fx.receiver.requestsTo('/everything').length).toBeGreaterThan(0);
    expect(h.noticesIn(fx.receiver.requestsTo('/dead'))).toEqual([]);
    expect(everything.id).toBeDefined();

    // The operator's copies: signed with OPERATOR_NOTIFY_SECRET, the company named, once each.
    await eventually(async () => h.noticesIn(fx.receiver.requestsTo('/operator')).filter((r) => h.bodyOf(r).data.webhook && (h.bodyOf(r).data.webhook as { id: string }).id === dead.id).length === 2, 10_000, 'both notices reach the operator');
    const operator = h.noticesIn(fx.receiver.requestsTo('/operator')).filter((r) => (h.bodyOf(r).data.webhook as { id: string }).id === dead.id);
    expect(operator.map((r) => r.headers['x-svc-event'])).toEqual(['WEBHOOK_FALLANDO', 'WEBHOOK_DESACTIVADO']);
    for (const r of operator) {
      expect(verify(r.rawBody, r.headers['x-svc-signature'], OPERATOR_SECRET)).toBe(true);
      expect(verify(r.rawBody, r.headers['x-svc-signature'], watcher.secret)).toBe(false);
      const body = h.bodyOf(r);
      expect(Object.keys(body).sort()).toEqual(['data', 'empresaId', 'event', 'timestamp']);
      expect(body.empresaId).toBe(c.id);
      expect(r.headers['webhook-id']).toBe(r.headers['x-request-id']);
    }

    // After reactivation, recuperar with omitidas delivers exactly the events created while it was
    // inactive, under each event's id, and a second call none.
    fx.receiver.respond('/dead', { status: 200 });
    const inactiveFrom = new Date();
    const missed: string[] = [];
    for (let i = 0; i < 3; i++) missed.push(await h.ship(c));
    const missedIds = (await fx.pool.query<{ id: string }>(`select id from outbox where data ->> 'numeroGuia' = any($1) order by created_at, id`, [missed])).rows.map((r) => r.id);
    await eventually(
      async () => Number((await fx.pool.query<{ n: string }>('select count(*) n from outbox where id = any($1) and repartido_en is not null', [missedIds])).rows[0]!.n) === 3,
      10_000,
      'the missed events are fanned out (to the others)',
    );
    expect((await h.api('patch', `/webhooks/${dead.id}`, c.live, { activo: true })).status).toBe(200);
    expect(await h.salud(c, dead.id)).toMatchObject({ fallasConsecutivas: 0, desactivacion: null });
    fx.receiver.reset();
    const replay = await h.api('post', `/webhooks/${dead.id}/recuperar`, c.live, { desde: inactiveFrom.toISOString(), omitidas: true });
    expect(replay.status).toBe(202);
    expect(replay.body.data).toEqual({ reenviadas: 0, pendientes: 0, omitidas: 3 });
    const got = await fx.receiver.waitFor(3, 10_000, '/dead');
    // Queued oldest first, but sent concurrently like any deliveries: they may arrive in any order
    // (CI saw the second one last), so the arrivals are compared as sets.
    expect(got.map((r) => r.headers['webhook-id']).sort()).toEqual([...missedIds].sort());
    expect(got.map((r) => (h.bodyOf(r).data as { numeroGuia: string }).numeroGuia).sort()).toEqual([...missed].sort());
    for (const r of got) expect(verify(r.rawBody, r.headers['x-svc-signature'], dead.secret)).toBe(true);
    const again = await h.api('post', `/webhooks/${dead.id}/recuperar`, c.live, { desde: inactiveFrom.toISOString(), omitidas: true });
    expect(again.body.data).toEqual({ reenviadas: 0, pendientes: 0, omitidas: 0 });
    await sleep(1000);
    expect(fx.receiver.requestsTo('/dead')).toHaveLength(3);
    // Without omitidas the answer is as it always was.
    const plain = await h.api('post', `/webhooks/${dead.id}/recuperar`, c.live, { desde: inactiveFrom.toISOString() });
    expect(plain.body.data).toEqual({ reenviadas: 0, pendientes: 0 });
    await eventually(async () => (await h.salud(c, dead.id)).estado === 'degradado', 10_000, 'a success after failures: degradado');
  }, 90_000);

  it('a receiver answering 410 Gone on all three attempts is deactivated at once (GONE), whatever the window', async () => {
    const c = await createCompany(fx.gw, funded);
    fx.receiver.respond('/gone', { status: 410 });
    const gone = await h.hook(c, '/gone');
    await h.ship(c);
    await eventually(async () => !(await h.active(gone.id)), 15_000, 'deactivated after one delivery of 410s');
    expect(fx.receiver.requestsTo('/gone')).toHaveLength(3);
    expect(await h.salud(c, gone.id)).toMatchObject({ estado: 'desactivado', fallasConsecutivas: 1, desactivacion: { por: 'sistema', motivo: 'GONE' } });
    const metrics = await fx.dispatcher.metrics.registry.getSingleMetricAsString('svc_webhooks_auto_disabled_total');
    expect(metrics).toMatch(/svc_webhooks_auto_disabled_total\{motivo="GONE"[^}]*\} 1/);
  }, 30_000);

  it('a 410 then a 200 is not GONE: only a delivery all of whose attempts answered 410', async () => {
    const c = await createCompany(fx.gw, funded);
    fx.receiver.respond('/once-gone', [{ status: 410 }, { status: 200 }]);
    const w = await h.hook(c, '/once-gone');
    await h.ship(c);
    await fx.receiver.waitFor(2, 10_000, '/once-gone');
    await eventually(async () => (await h.salud(c, w.id)).ultimoExito !== null, 5000, 'its success counted');
    expect(await h.active(w.id)).toBe(true);
  }, 30_000);

  it('a receiver that fails and recovers before the window is never deactivated; salud says degradado, then fails again from zero', async () => {
    const c = await createCompany(fx.gw, funded);
    let failing = true;
    fx.receiver.respond('/flaky', () => ({ status: failing ? 500 : 200 }));
    const w = await h.hook(c, '/flaky');
    // Four failed deliveries (more than MIN_FAILURES), well inside the 7.2 s window.
    for (let i = 0; i < 4; i++) await h.ship(c);
    await eventually(async () => (await h.salud(c, w.id)).fallasConsecutivas === 4, 15_000, 'four failures counted');
    const during = await h.salud(c, w.id);
    expect(during).toMatchObject({ estado: 'fallando', ultimoExito: null, desactivacion: null });
    expect(during.desde).not.toBeNull();
    failing = false;
    await h.ship(c);
    await eventually(async () => (await h.salud(c, w.id)).fallasConsecutivas === 0, 10_000, 'the success ends the run');
    const after = await h.salud(c, w.id);
    expect(after).toMatchObject({ estado: 'degradado', ultimas24h: { exitosas: 1, fallidas: 4, pendientes: 0 } });
    expect(after.ultimoExito).not.toBeNull();
    // Past the window, with successes and then fresh failures (fewer than the window): still active.
    await sleep(7500);
    failing = true;
    for (let i = 0; i < 3; i++) await h.ship(c);
    await eventually(async () => (await h.salud(c, w.id)).fallasConsecutivas === 3, 15_000, 'a new run of three');
    await sleep(500);
    expect(await h.active(w.id)).toBe(true);
    const log = await fx.pool.query(`select 1 from actividad where webhook_id = $1 and accion = 'webhook.deactivated'`, [w.id]);
    expect(log.rows).toEqual([]);
  }, 60_000);
});

describe('WEBHOOK_FALLANDO and salud over a long window (WEBHOOK_DISABLE_AFTER_HOURS=1, MIN_FAILURES=2)', () => {
  let fx: DispatcherFixture;
  let h: ReturnType<typeof helpers>;

  beforeAll(async () => {
    fx = await startDispatcherFixture('endpoint-failing', { dispatcher: { env: { WEBHOOK_DISABLE_AFTER_HOURS: '1', WEBHOOK_DISABLE_MIN_FAILURES: '2' } } });
    h = helpers(fx);
  });
  afterAll(() => fx?.stop());

  it('reaches a subscribed webhook once within the day, however many failures follow; never the empty-eventos one', async () => {
    const c = await createCompany(fx.gw, funded);
    fx.receiver.respond('/down', { status: 503 });
    const down = await h.hook(c, '/down');
    const watcher = await h.hook(c, '/watch-failing', ['WEBHOOK_FALLANDO']);
    const other = await h.hook(c, '/watch-disabled', ['WEBHOOK_DESACTIVADO']);
    await h.hook(c, '/all');
    for (let i = 0; i < 6; i++) await h.ship(c);
    await eventually(async () => (await h.salud(c, down.id)).fallasConsecutivas === 6, 20_000, 'six failures counted');
    await sleep(1000);
    const notices = h.noticesIn(fx.receiver.requestsTo('/watch-failing'));
    expect(notices).toHaveLength(1);
    const body = h.bodyOf(notices[0]!);
    expect(body.event).toBe('WEBHOOK_FALLANDO');
    expect(body.webhookId).toEqual(expect.any(String));
    expect(body.data).toMatchObject({ webhook: { id: down.id }, motivo: null, desde: expect.any(String) });
    // At least WEBHOOK_DISABLE_MIN_FAILURES: deliveries ending together are counted in one batch.
    expect(body.data.fallasConsecutivas).toBeGreaterThanOrEqual(2);
    expect(verify(notices[0]!.rawBody, notices[0]!.headers['x-svc-signature'], watcher.secret)).toBe(true);
    expect(fx.receiver.requestsTo('/watch-disabled')).toEqual([]);
    expect(h.noticesIn(fx.receiver.requestsTo('/all'))).toEqual([]);
    expect(await h.active(down.id)).toBe(true);
    expect(other.id).toBeDefined();

    const s = await h.salud(c, down.id);
    expect(s).toMatchObject({ estado: 'fallando', fallasConsecutivas: 6, ultimoExito: null, desactivacion: null, ultimas24h: { exitosas: 0, fallidas: 6, pendientes: 0 } });
    expect(Date.parse(s.desde!)).toBeLessThanOrEqual(Date.now());
  }, 60_000);

  it('salud: saludable before any delivery and after successes; desactivado by the company on DELETE and PATCH; 404 outside the scope', async () => {
    const c = await createCompany(fx.gw, funded);
    const w = await h.hook(c, '/fine');
    expect(await h.salud(c, w.id)).toEqual({
      estado: 'saludable',
      desde: null,
      ultimoExito: null,
      fallasConsecutivas: 0,
      ultimas24h: { exitosas: 0, fallidas: 0, pendientes: 0 },
      desactivacion: null,
    });
    await h.ship(c);
    await eventually(async () => (await h.salud(c, w.id)).ultimoExito !== null, 10_000, 'the success counted');
    const ok = await h.salud(c, w.id);
    expect(ok).toMatchObject({ estado: 'saludable', fallasConsecutivas: 0, ultimas24h: { exitosas: 1, fallidas: 0, pendientes: 0 } });
    expect(ok.desde).toBe(ok.ultimoExito);

    expect((await h.api('delete', `/webhooks/${w.id}`, c.live)).status).toBe(200);
    const off = await h.salud(c, w.id);
    expect(off).toMatchObject({ estado: 'desactivado', desactivacion: { por: 'empresa', motivo: null } });
    expect(off.desde).toBe(off.desactivacion!.fecha);
    expect((await h.api('patch', `/webhooks/${w.id}`, c.live, { activo: true })).status).toBe(200);
    expect((await h.salud(c, w.id)).estado).toBe('saludable');
    expect((await h.api('patch', `/webhooks/${w.id}`, c.live, { activo: false })).status).toBe(200);
    expect((await h.salud(c, w.id)).desactivacion).toMatchObject({ por: 'empresa', motivo: null });

    const stranger = await createCompany(fx.gw, funded);
    const res = await h.api('get', `/webhooks/${w.id}/salud`, stranger.live);
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('NOT_FOUND');
  }, 30_000);
});
