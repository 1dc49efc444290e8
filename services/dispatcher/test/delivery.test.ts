import type pg from 'pg';
import type { Queue } from 'bullmq';
import { JOBS } from '@svc/contracts';
import { verify } from '@svc/webhook-signature';
import type { Receiver, ReceivedRequest } from '../../../test/support/https-receiver';
import { guia, moveOn } from '../../../test/support/shipment-fixtures';
import { bearer, createBranch, createCompany, type Company, type TestGateway } from '../../../test/support/test-gateway';
import { startDispatcherFixture, type DispatcherFixture, type TestDispatcher } from '../../../test/support/test-dispatcher';
import { createDispatcherMetrics } from '../src/observability/dispatcher-metrics';
import { RETRY_LEAD_MS } from '../src/retry-policy/delivery-retry.policy';

/**
 * How far a retry job's queued due time may sit from `dueAt - RETRY_LEAD_MS`: BullMQ stamps the job a
 * moment after the delay is computed, which on a loaded 2-core machine was 7 ms. Far below the
 * 300 ms lead, so the check still tells a job queued ahead from one queued at its due time.
 */
const QUEUED_AT_TOLERANCE_MS = 50;
import { sleep } from '../../../test/support/eventually';

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const funded = { planActivo: true, creditos: 10_000, sucursalesHabilitadas: true };

interface EntregaRow {
  id: string;
  evento_id: string | null;
  evento: string;
  estado: string;
  exitoso: boolean;
  status_code: number;
  intentos: number;
  ultimo_intento_en: Date | null;
  proximo_intento_en: Date | null;
}

describe('dispatcher: fan-out, signed delivery, retries', () => {
  let fx: DispatcherFixture;
  let receiver: Receiver;
  let gw: TestGateway;
  let dispatcher: TestDispatcher;
  let pool: pg.Pool;
  let deliveryQueue: Queue;

  beforeAll(async () => {
    fx = await startDispatcherFixture('dispatch');
    ({ receiver, gw, dispatcher, pool } = fx);
    deliveryQueue = fx.queue(JOBS.delivery.queue);
  });
  afterAll(() => fx?.stop());

  const hook = async (c: Company, path: string, eventos: string[] = []): Promise<{ id: string; secret: string }> => {
    const res = await gw.http.post('/api/v1/webhooks').set('Authorization', bearer(c.live)).send({ url: receiver.url(path), eventos });
    if (res.status !== 201) throw new Error(`${res.status} ${JSON.stringify(res.body)}`);
    return res.body.data as { id: string; secret: string };
  };
  const branchHook = async (c: Company, sucursalId: string, path: string, eventos: string[] = []) => {
    const res = await gw.admin('post', `/empresas/${c.id}/sucursales/${sucursalId}/webhooks`, { url: receiver.url(path), eventos });
    if (res.status !== 201) throw new Error(`${res.status} ${JSON.stringify(res.body)}`);
    return res.body.data as { id: string; secret: string };
  };
  const ship = async (token: string, requestId?: string): Promise<string> => {
    const r = gw.http.post('/api/v1/guias').set('Authorization', bearer(token));
    const res = await (requestId ? r.set('X-Request-Id', requestId) : r).send(guia());
    if (res.status !== 201) throw new Error(`${res.status} ${JSON.stringify(res.body)}`);
    return res.body.data.numeroGuia as string;
  };
  const deliveriesOf = async (webhookId: string): Promise<EntregaRow[]> =>
    (await pool.query<EntregaRow>('select * from entregas where webhook_id = $1 order by created_at', [webhookId])).rows;
  const until = async <T>(what: string, read: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 10_000): Promise<T> => {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const v = await read();
      if (ok(v)) return v;
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(v)}`);
      await sleep(50);
    }
  };
  const bodyOf = (r: ReceivedRequest) => JSON.parse(r.rawBody.toString('utf8')) as Record<string, unknown> & { data: Record<string, unknown> };

  it('routes company events to company webhooks, branch events to company and that branch webhooks, by subscription', async () => {
    const c = await createCompany(gw, funded);
    const norte = await createBranch(gw, c.id, 'Norte');
    const sur = await createBranch(gw, c.id, 'Sur');
    const other = await createCompany(gw, funded);
    const all = await hook(c, '/r-all');
    const created = await hook(c, '/r-created', ['GUIA_CREADA']);
    const collected = await hook(c, '/r-collected', ['GUIA_RECOLECTADA', 'GUIA_ANULADA']);
    const n = await branchHook(c, norte.id, '/r-norte');
    const s = await branchHook(c, sur.id, '/r-sur');
    const gone = await hook(c, '/r-gone');
    await gw.http.delete(`/api/v1/webhooks/${gone.id}`).set('Authorization', bearer(c.live)).expect(200);
    await hook(other, '/r-other');

    const g1 = await ship(c.live); // company: GUIA_CREADA
    const g2 = await ship(norte.live); // branch Norte: GUIA_CREADA
    expect((await moveOn(gw, g2, { evento: 'GUIA_RECOLECTADA' })).status).toBe(200); // Norte's shipment

    const expected: Record<string, Array<[string, string]>> = {
      '/r-all': [[g1, 'GUIA_CREADA'], [g2, 'GUIA_CREADA'], [g2, 'GUIA_RECOLECTADA']],
      '/r-created': [[g1, 'GUIA_CREADA'], [g2, 'GUIA_CREADA']],
      '/r-collected': [[g2, 'GUIA_RECOLECTADA']],
      '/r-norte': [[g2, 'GUIA_CREADA'], [g2, 'GUIA_RECOLECTADA']],
    };
    for (const [path, list] of Object.entries(expected)) await receiver.waitFor(list.length, 10_000, path);
    await sleep(700); // anything misrouted would have arrived by now
    for (const [path, list] of Object.entries(expected)) {
      const got = receiver.requestsTo(path).map((r) => {
        const b = bodyOf(r);
        return [b.data.numeroGuia, b.event] as [string, string];
      });
      expect(got.sort()).toEqual([...list].sort());
    }
    for (const path of ['/r-sur', '/r-gone', '/r-other']) expect(receiver.requestsTo(path)).toHaveLength(0);

    // One recorded delivery per (event, webhook), each successful at the first attempt.
    for (const [w, count] of [[all, 3], [created, 2], [collected, 1], [n, 2], [s, 0], [gone, 0]] as const) {
      const rows = await until(`deliveries of ${w.id}`, () => deliveriesOf(w.id), (r) => r.filter((x) => x.estado === 'exitosa').length === count);
      expect(rows).toHaveLength(count);
      for (const r of rows) expect(r).toMatchObject({ exitoso: true, status_code: 200, intentos: 1, estado: 'exitosa' });
    }
  });

  it('signs the exact bytes, sends the contract headers, and carries the request id into its logs', async () => {
    const c = await createCompany(gw, funded);
    const w = await hook(c, '/sig');
    const requestId = 'trace-sig-0001-abcdef';
    const numero = await ship(c.live, requestId);
    const [req] = await receiver.waitFor(1, 10_000, '/sig');
    const body = bodyOf(req!);
    expect(body).toEqual({
      event: 'GUIA_CREADA',
      timestamp: expect.stringMatching(ISO),
      webhookId: expect.stringMatching(UUID),
      data: { numeroGuia: numero, estado: 'CREADA' },
    });
    expect(req!.method).toBe('POST');
    expect(req!.headers['content-type']).toBe('application/json');
    expect(req!.headers['x-svc-event']).toBe('GUIA_CREADA');
    expect(req!.headers['x-svc-timestamp']).toBe(body.timestamp);
    expect(req!.headers['x-request-id']).toBe(body.webhookId);
    expect(req!.headers['user-agent']).toBe('SVC-Webhooks/1.0');
    expect(req!.headers['x-svc-signature']).toMatch(/^sha256=[0-9a-f]{64}$/);
    expect(verify(req!.rawBody, req!.headers['x-svc-signature'], w.secret)).toBe(true);
    // The signature is over the raw bytes: the same JSON re-serialised does not verify.
    expect(verify(Buffer.from(JSON.stringify(body, null, 1)), req!.headers['x-svc-signature'], w.secret)).toBe(false);

    // The payload's webhookId (= X-Request-Id) is the id of the one delivery of (event, webhook).
    const event = await pool.query<{ id: string }>(`select id from outbox where data->>'numeroGuia' = $1`, [numero]);
    const eventId = event.rows[0]!.id;
    const [row] = await until('the delivery recorded', () => deliveriesOf(w.id), (r) => r[0]?.estado === 'exitosa');
    const delivery = await pool.query<{ id: string }>('select id from entregas where evento_id = $1 and webhook_id = $2', [eventId, w.id]);
    expect(delivery.rows).toEqual([{ id: body.webhookId }]);
    expect(row).toMatchObject({ id: body.webhookId, evento_id: eventId, evento: 'GUIA_CREADA', exitoso: true, status_code: 200, intentos: 1 });
    // One queue hop: the event's job made the first attempt; no delivery job was queued for it.
    const eventJob = await fx.queue(JOBS.shipmentEvent.queue).getJob(eventId);
    expect(eventJob === undefined ? 'removed' : await eventJob.getState()).toMatch(/^(completed|removed)$/);
    if (eventJob) expect(eventJob.returnvalue).toBe(1);
    expect(await deliveryQueue.getJob(`${body.webhookId}.1`)).toBeUndefined();
    expect(await deliveryQueue.getJobCountByTypes('waiting', 'active', 'delayed', 'completed', 'failed')).toBe(0);

    // Event data per event: fechaEntrega with GUIA_ENTREGADA.
    for (const evento of ['GUIA_RECOLECTADA', 'GUIA_EN_BODEGA', 'GUIA_EN_RUTA']) {
      expect((await moveOn(gw, numero, { evento })).status).toBe(200);
    }
    const fechaEntrega = '2026-03-01T15:30:00.000Z';
    expect((await moveOn(gw, numero, { evento: 'GUIA_ENTREGADA', fechaEntrega })).status).toBe(200);
    const all = await receiver.waitFor(5, 10_000, '/sig');
    const delivered = all.map(bodyOf).find((b) => b.event === 'GUIA_ENTREGADA');
    expect(delivered!.data).toEqual({ numeroGuia: numero, estado: 'ENTREGADO', fechaEntrega });
    for (const r of all) expect(verify(r.rawBody, r.headers['x-svc-signature'], w.secret)).toBe(true);

    const line = await until(
      'the delivery log line',
      async () => dispatcher.logs.lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.deliveryId === body.webhookId && l.msg === 'delivery finished'),
      (l) => l !== undefined,
    );
    expect(line).toMatchObject({ eventId, requestId, webhook: w.id, outcome: 'success', evento: 'GUIA_CREADA', service: 'dispatcher' });
    expect(dispatcher.logs.text()).not.toContain(w.secret);
  });

  it('makes exactly three attempts, 1 s then 2 s apart, with the same webhookId; a 3xx is not followed; recorded failed', async () => {
    const c = await createCompany(gw, funded);
    receiver.respond('/fail', { status: 500 });
    receiver.respond('/moved', { status: 302, location: '/moved-target' });
    const failing = await hook(c, '/fail');
    const moved = await hook(c, '/moved');
    await ship(c.live);

    for (const [w, path, status] of [[failing, '/fail', 500], [moved, '/moved', 302]] as const) {
      const reqs = await receiver.waitFor(3, 10_000, path);
      const bodies = reqs.map(bodyOf);
      expect(new Set(bodies.map((b) => b.webhookId)).size).toBe(1);
      expect(new Set(reqs.map((r) => r.headers['x-request-id']))).toEqual(new Set([bodies[0]!.webhookId]));
      for (const r of reqs) expect(verify(r.rawBody, r.headers['x-svc-signature'], w.secret)).toBe(true);
      expect(new Set(bodies.map((b) => b.timestamp)).size).toBe(3); // stamped per attempt
      const gap1 = reqs[1]!.receivedAt - reqs[0]!.receivedAt;
      const gap2 = reqs[2]!.receivedAt - reqs[1]!.receivedAt;
      expect(gap1).toBeGreaterThanOrEqual(700);
      expect(gap1).toBeLessThanOrEqual(1300);
      expect(gap2).toBeGreaterThanOrEqual(1700);
      expect(gap2).toBeLessThanOrEqual(2300);

      const [row] = await until(`${path} recorded failed`, () => deliveriesOf(w.id), (r) => r[0]?.estado === 'fallida');
      expect(row).toMatchObject({ id: bodies[0]!.webhookId, exitoso: false, intentos: 3, status_code: status });
      // The first attempt is made in the event's job; then one job per retry, each run once; the
      // third attempt's completed and no fourth is queued. A receiver's failure is recorded, never a
      // failed job (those are for Postgres or Redis failing).
      expect(await deliveryQueue.getJob(`${row!.id}.1`)).toBeUndefined();
      for (const attempt of [2, 3]) {
        const job = await deliveryQueue.getJob(`${row!.id}.${attempt}`);
        expect(job === undefined ? 'removed' : await job.getState()).toMatch(/^(completed|removed)$/);
        if (job) expect(job.attemptsMade).toBe(1);
        // Queued RETRY_LEAD_MS before its due time, and sent no earlier than that time.
        if (job) {
          const dueAt = (job.data as { dueAt?: number }).dueAt;
          expect(dueAt).toEqual(expect.any(Number));
          expect(Math.abs(job.timestamp + (job.opts.delay ?? 0) - (dueAt! - RETRY_LEAD_MS))).toBeLessThanOrEqual(QUEUED_AT_TOLERANCE_MS);
          expect(reqs[attempt - 1]!.receivedAt).toBeGreaterThanOrEqual(dueAt! - 2);
        }
      }
      expect(await deliveryQueue.getJob(`${row!.id}.4`)).toBeUndefined();
      expect(receiver.requestsTo(path)).toHaveLength(3);

      const detail = await gw.http.get(`/api/v1/webhooks/${w.id}`).set('Authorization', bearer(c.live));
      expect(detail.body.data.entregas).toEqual([
        expect.objectContaining({ id: row!.id, evento: 'GUIA_CREADA', exitoso: false, statusCode: status, intentos: 3 }),
      ]);
    }
    expect(receiver.requestsTo('/moved-target')).toHaveLength(0);
  }, 20_000);

  it('succeeds at the second attempt after a failure', async () => {
    const c = await createCompany(gw, funded);
    receiver.respond('/flaky', [{ status: 503 }, { status: 200 }]);
    const w = await hook(c, '/flaky');
    await ship(c.live);
    const reqs = await receiver.waitFor(2, 10_000, '/flaky');
    expect(reqs[0]!.headers['x-request-id']).toBe(reqs[1]!.headers['x-request-id']);
    const gap = reqs[1]!.receivedAt - reqs[0]!.receivedAt;
    expect(gap).toBeGreaterThanOrEqual(700);
    expect(gap).toBeLessThanOrEqual(1300);
    const [row] = await until('success recorded', () => deliveriesOf(w.id), (r) => r[0]?.estado === 'exitosa');
    expect(row).toMatchObject({ exitoso: true, status_code: 200, intentos: 2 });
    await sleep(2500);
    expect(receiver.requestsTo('/flaky')).toHaveLength(2);
  }, 15_000);

  it('dates the next attempt from when the answer ended: the logged start plus its duration, then 1 s', async () => {
    const c = await createCompany(gw, funded);
    // A failure that takes 300 ms, then a success slow enough to read the row between the two.
    receiver.respond('/slow-fail', [{ status: 503, delayMs: 300 }, { status: 200, delayMs: 1500 }]);
    const w = await hook(c, '/slow-fail');
    await ship(c.live);
    const [row] = await until('the first attempt recorded', () => deliveriesOf(w.id), (r) => r[0]?.intentos === 1);
    const attempt = await pool.query<{ fecha: Date; duracion_ms: number }>('select fecha, duracion_ms from entrega_intentos where entrega_id = $1 and numero = 1', [row!.id]);
    const { fecha, duracion_ms } = attempt.rows[0]!;
    expect(duracion_ms).toBeGreaterThanOrEqual(300);
    // Not when the process got round to it after the answer: exactly the contract's 1 s after it.
    expect(row!.proximo_intento_en!.getTime() - (fecha.getTime() + duracion_ms)).toBe(1000);
    await until('the second attempt succeeded', () => deliveriesOf(w.id), (r) => r[0]?.estado === 'exitosa');
  }, 15_000);

  it('fails an attempt after 5 s without an answer (statusCode 0); a webhook deactivated meanwhile gets no more attempts', async () => {
    const c = await createCompany(gw, funded);
    receiver.respond('/slow', { status: 200, delayMs: 7000 });
    const w = await hook(c, '/slow');
    await ship(c.live);
    const [req] = await receiver.waitFor(1, 10_000, '/slow');
    const [row] = await until('the timed-out attempt', () => deliveriesOf(w.id), (r) => (r[0]?.intentos ?? 0) >= 1, 8000);
    const recordedAfter = Date.now() - req!.receivedAt;
    expect(row).toMatchObject({ estado: 'pendiente', exitoso: false, status_code: 0, intentos: 1 });
    expect(recordedAfter).toBeGreaterThanOrEqual(4500);
    expect(recordedAfter).toBeLessThan(6500);

    await gw.http.delete(`/api/v1/webhooks/${w.id}`).set('Authorization', bearer(c.live)).expect(200);
    const [ended] = await until('the delivery abandoned', () => deliveriesOf(w.id), (r) => r[0]?.estado === 'fallida', 5000);
    expect(ended).toMatchObject({ exitoso: false, intentos: 1, status_code: 0 });
    await sleep(500);
    expect(receiver.requestsTo('/slow')).toHaveLength(1);
  }, 20_000);

  it('exposes its metrics, health and readiness on the metrics port', async () => {
    const base = `http://127.0.0.1:${dispatcher.metricsPort}`;
    const text = await (await fetch(`${base}/metrics`)).text();
    expect(text).toMatch(/svc_webhook_deliveries_total\{[^}]*evento="GUIA_CREADA"[^}]*outcome="success"[^}]*\} [1-9]/);
    expect(text).toMatch(/svc_webhook_deliveries_total\{[^}]*outcome="failure"[^}]*\} [1-9]/);
    for (const result of ['2xx', '3xx', '5xx', 'timeout']) {
      expect(text).toMatch(new RegExp(`svc_webhook_attempts_total\\{[^}]*result="${result}"[^}]*\\} [1-9]`));
    }
    expect(text).toMatch(/svc_webhook_attempt_duration_seconds_count\{[^}]*\} [1-9]/);
    expect(text).toMatch(/svc_event_to_delivery_seconds_count\{[^}]*\} [1-9]/);
    // Receivers failing fail no job: nothing has ended failed in the queues.
    expect(text).toMatch(/svc_queue_jobs\{[^}]*queue="webhook-deliveries"[^}]*state="failed"[^}]*\} 0\n/);
    expect(text).toMatch(/svc_oldest_overdue_delivery_seconds\{[^}]*\} [0-9.e+-]+\n/);
    expect(text).toMatch(/svc_oldest_unfanned_event_seconds\{[^}]*\} [0-9.e+-]+\n/);
    for (const state of ['waiting', 'active', 'delayed']) {
      expect(text).toMatch(new RegExp(`svc_queue_jobs\\{[^}]*queue="shipment-events"[^}]*state="${state}"`));
    }
    expect(text).toContain('svc_process_resident_memory_bytes');
    expect(text).toContain('service="dispatcher"');

    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    const ready = await fetch(`${base}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: 'ready', checks: { postgres: 'up', redis: 'up' } });
  });

  it('names its metrics as issue 5 does', async () => {
    const names = (await createDispatcherMetrics().registry.getMetricsAsJSON()).map((m) => m.name);
    expect(names).toEqual(
      expect.arrayContaining([
        'svc_webhook_deliveries_total',
        'svc_webhook_attempts_total',
        'svc_webhook_attempt_duration_seconds',
        'svc_event_to_delivery_seconds',
        'svc_queue_jobs',
        'svc_process_cpu_seconds_total',
      ]),
    );
  });
});
