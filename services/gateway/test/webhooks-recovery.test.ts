import { randomUUID } from 'node:crypto';
import type { Queue } from 'bullmq';
import { JOBS, type DeliveryJob } from '@svc/contracts';
import { count } from '../../../test/support/shipment-fixtures';
import { bearer, createCompany, startGatewayFixture, type Company, type GatewayFixture } from '../../../test/support/test-gateway';

const envelope = (code: string) => ({ success: false, error: { code, message: expect.any(String) } });
const HOUR = 3600_000;

/**
 * Recovery at scale and under races, with no dispatcher: the deliveries queue is looked at directly.
 * Failed deliveries are written straight into Postgres, as months of a receiver's outage would leave them.
 */
describe('POST /api/v1/webhooks/{id}/recuperar: thousands at once, and never twice', () => {
  let fx: GatewayFixture;
  let c: Company;
  let queue: Queue<DeliveryJob>;

  beforeAll(async () => {
    fx = await startGatewayFixture('recovery', { env: { RATE_LIMIT_PER_MINUTE: '100000' } });
    c = await createCompany(fx.gw);
    queue = fx.queue<DeliveryJob>(JOBS.delivery.queue);
  });
  afterAll(() => fx?.stop());

  const api = (path: string, body?: unknown, token = c.live) => {
    const r = fx.gw.http.post(`/api/v1${path}`).set('Authorization', bearer(token));
    return body === undefined ? r : r.send(body as object);
  };
  const hook = async (): Promise<string> => {
    const res = await api('/webhooks', { url: 'https://receiver.test/hook' });
    if (res.status !== 201) throw new Error(`${res.status} ${JSON.stringify(res.body)}`);
    return res.body.data.id as string;
  };
  /** `n` failed GUIA_EN_RUTA deliveries of their own events (sequence 4), created `at` (default an hour ago); returns the event ids. */
  const failedDeliveries = async (webhookId: string, n: number, at = new Date(Date.now() - HOUR)): Promise<string[]> => {
    const rows = await fx.pool.query<{ id: string }>(
      `with ev as (
         insert into outbox (id, empresa_id, sucursal_id, evento, data, request_id, created_at, enviado_en, repartido_en, secuencia, modo)
         select gen_random_uuid(), $2, null, 'GUIA_EN_RUTA', jsonb_build_object('numeroGuia', 'SVC' || lpad(g::text, 10, '0'), 'estado', 'EN_RUTA'),
                null, $3, now(), now(), 4, 'live'
         from generate_series(1, $4) g
         returning id, data
       )
       insert into entregas (id, webhook_id, evento_id, evento, estado, exitoso, status_code, intentos, ultimo_intento_en, numero_guia, created_at)
       select gen_random_uuid(), $1, id, 'GUIA_EN_RUTA', 'fallida', false, 500, 3, now(), data ->> 'numeroGuia', $3
       from ev
       returning evento_id as id`,
      [webhookId, c.id, at.toISOString(), n],
    );
    return rows.rows.map((r) => r.id);
  };
  const resendsOf = (webhookId: string) => count(fx.pool, 'select count(*) n from entregas where webhook_id = $1 and es_reenvio', [webhookId]);
  const resentTwice = (webhookId: string) =>
    count(fx.pool, 'select count(*) n from (select reenvio_de from entregas where webhook_id = $1 and es_reenvio group by 1 having count(*) > 1) x', [webhookId]);
  const desde = () => new Date(Date.now() - 2 * HOUR).toISOString();

  it('resends 3000 failed deliveries in two calls (2000, then the 1000 left), queueing each first attempt with its event', async () => {
    const webhookId = await hook();
    const events = await failedDeliveries(webhookId, 3000);
    const start = Date.now();
    const res = await api(`/webhooks/${webhookId}/recuperar`, { desde: desde() });
    const tookMs = Date.now() - start;
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ success: true, data: { reenviadas: 2000, pendientes: 1000 } });
    // The answer waits for the rows only, not for the jobs (a generous bound: it bounds a hang).
    expect(tookMs).toBeLessThan(3000);
    expect(await resendsOf(webhookId)).toBe(2000);
    // The oldest first, in (createdAt, id) order: no delivery left is older than one resent.
    const olderLeft = await count(
      fx.pool,
      `select count(*) n from entregas e where e.webhook_id = $1 and not e.es_reenvio
         and not exists (select 1 from entregas r where r.reenvio_de = e.id)
         and exists (select 1 from entregas r join entregas o on o.id = r.reenvio_de
                     where r.webhook_id = $1 and (o.created_at, o.id) > (e.created_at, e.id))`,
      [webhookId],
    );
    expect(olderLeft).toBe(0);
    const more = await api(`/webhooks/${webhookId}/recuperar`, { desde: desde() });
    expect(more.body).toEqual({ success: true, data: { reenviadas: 1000, pendientes: 0 } });
    expect(await resendsOf(webhookId)).toBe(3000);

    await fx.gw.deps.resendRelay.drain();
    const jobs = await queue.getJobs(['waiting', 'prioritized', 'delayed'], 0, -1);
    const mine = jobs.filter((j) => j.data.webhookId === webhookId);
    expect(mine).toHaveLength(3000);
    expect(new Set(mine.map((j) => j.data.eventId))).toEqual(new Set(events));
    const resends = await fx.pool.query<{ id: string; evento_id: string }>('select id, evento_id from entregas where webhook_id = $1 and es_reenvio', [webhookId]);
    const byId = new Map(resends.rows.map((r) => [r.id, r.evento_id]));
    for (const job of mine) {
      expect(job.id).toBe(`${job.data.deliveryId}.1`);
      expect(byId.get(job.data.deliveryId)).toBe(job.data.eventId);
      expect(job.data).toMatchObject({ attempt: 1, evento: 'GUIA_EN_RUTA', data: { estado: 'EN_RUTA' }, sequence: 4, mode: 'live' });
    }

    const again = await api(`/webhooks/${webhookId}/recuperar`, { desde: desde() });
    expect(again.body).toEqual({ success: true, data: { reenviadas: 0, pendientes: 0 } });
    expect(await resendsOf(webhookId)).toBe(3000);
    expect(await resentTwice(webhookId)).toBe(0);
  }, 60_000);

  it('resends each delivery once when recoveries of the same window race', async () => {
    const webhookId = await hook();
    await failedDeliveries(webhookId, 1000);
    const window = { desde: desde() };
    const answers = await Promise.all(Array.from({ length: 4 }, () => api(`/webhooks/${webhookId}/recuperar`, window)));
    expect(answers.map((a) => a.status)).toEqual([202, 202, 202, 202]);
    // Batches of the four calls take turns under the webhook's lock: together they resend each once,
    // and each call ends having seen the whole window, so none has any left.
    const counts = answers.map((a) => a.body.data.reenviadas as number);
    expect(counts.reduce((x, y) => x + y, 0)).toBe(1000);
    expect(answers.map((a) => a.body.data.pendientes)).toEqual([0, 0, 0, 0]);
    expect(await resendsOf(webhookId)).toBe(1000);
    expect(await resentTwice(webhookId)).toBe(0);

    // A resend by hand racing a recovery of its original: one of them resends it, never both.
    const other = await hook();
    const [eventId] = await failedDeliveries(other, 1);
    const original = (await fx.pool.query<{ id: string }>('select id from entregas where evento_id = $1', [eventId])).rows[0]!.id;
    const [byHand, recovery] = await Promise.all([
      api(`/webhooks/${other}/entregas/${original}/reenviar`),
      api(`/webhooks/${other}/recuperar`, window),
    ]);
    expect(byHand.status).toBe(202);
    expect(recovery.status).toBe(202);
    expect(await resendsOf(other)).toBe(1 + (recovery.body.data.reenviadas as number));
    // The recovery saw the resend by hand (0), or came first (1) and then the resend by hand added a second on purpose.
    expect([0, 1]).toContain(recovery.body.data.reenviadas);
    await fx.gw.deps.resendRelay.drain();
  }, 60_000);

  it('takes only the window: desde inclusive, hasta exclusive; leaves successes, resends and pending deliveries alone', async () => {
    const webhookId = await hook();
    const desde = new Date(Date.now() - 3 * HOUR);
    const hasta = new Date(desde.getTime() + HOUR);
    const at = (offsetMs: number) => new Date(desde.getTime() + offsetMs);
    await failedDeliveries(webhookId, 1, at(-1)); // just before
    const [first] = await failedDeliveries(webhookId, 1, desde); // inclusive
    const [middle] = await failedDeliveries(webhookId, 1, at(HOUR / 2));
    await failedDeliveries(webhookId, 1, hasta); // exclusive
    const [failedPing, ok, pending, resent] = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
    await fx.pool.query(
      `insert into entregas (id, webhook_id, evento_id, evento, estado, exitoso, status_code, intentos, created_at, es_reenvio, reenvio_de)
       values ($1, $5, null, 'PING', 'fallida', false, 500, 1, $6, false, null),
              ($2, $5, null, 'PING', 'exitosa', true, 200, 1, $6, false, null),
              ($3, $5, null, 'PING', 'pendiente', false, 0, 1, $6, false, null),
              ($4, $5, $1, 'PING', 'fallida', false, 500, 3, $6, true, $1)`,
      [failedPing, ok, pending, resent, webhookId, at(60_000).toISOString()],
    );
    // The failed PING already has a resend (`resent`, itself failed): neither is taken.
    const res = await api(`/webhooks/${webhookId}/recuperar`, { desde: desde.toISOString(), hasta: hasta.toISOString() });
    expect(res.body).toEqual({ success: true, data: { reenviadas: 2, pendientes: 0 } });
    const made = await fx.pool.query<{ evento_id: string }>(`select evento_id from entregas where webhook_id = $1 and es_reenvio and id <> $2`, [webhookId, resent]);
    expect(made.rows.map((r) => r.evento_id).sort()).toEqual([first, middle].sort());

    // Without the resend, the failed PING is taken, and its resend carries the PING's id as its event.
    await fx.pool.query('delete from entregas where id = $1', [resent]);
    const more = await api(`/webhooks/${webhookId}/recuperar`, { desde: desde.toISOString(), hasta: hasta.toISOString() });
    expect(more.body).toEqual({ success: true, data: { reenviadas: 1, pendientes: 0 } });
    const ping = await fx.pool.query<{ id: string; evento_id: string }>(`select id, evento_id from entregas where reenvio_de = $1`, [failedPing]);
    expect(ping.rows).toEqual([{ id: expect.any(String), evento_id: failedPing }]);
    await fx.gw.deps.resendRelay.drain();
    const pingJob = await queue.getJob(`${ping.rows[0]!.id}.1`);
    expect(pingJob!.data).toMatchObject({ eventId: failedPing, evento: 'PING', data: {}, mode: 'live', webhookId });
    expect(pingJob!.data.sequence).toBeUndefined();

    // `hasta` defaults to now: the two outside the first window are taken now.
    expect((await api(`/webhooks/${webhookId}/recuperar`, { desde: new Date(desde.getTime() - 1).toISOString() })).body.data).toEqual({ reenviadas: 2, pendientes: 0 });
    await fx.gw.deps.resendRelay.drain();
  }, 30_000);

  it('skips a failed delivery whose event is no longer kept', async () => {
    const webhookId = await hook();
    const [gone] = await failedDeliveries(webhookId, 2);
    await fx.pool.query('delete from outbox where id = $1', [gone]);
    expect((await api(`/webhooks/${webhookId}/recuperar`, { desde: desde() })).body.data).toEqual({ reenviadas: 1, pendientes: 0 });
    const original = (await fx.pool.query<{ id: string }>('select id from entregas where evento_id = $1 and not es_reenvio', [gone])).rows[0]!.id;
    const res = await api(`/webhooks/${webhookId}/entregas/${original}/reenviar`);
    expect(res.status).toBe(404);
    expect(res.body).toEqual(envelope('NOT_FOUND'));
    await fx.gw.deps.resendRelay.drain();
  });

  it.each<[string, unknown]>([
    ['no body', undefined],
    ['no desde', { hasta: '2026-11-01T00:00:00Z' }],
    ['desde not a date', { desde: 'ayer' }],
    ['desde a number', { desde: 1700000000 }],
    ['hasta not a date', { desde: '2026-11-01T00:00:00Z', hasta: '2026-13-45T00:00:00Z' }],
    ['desde after hasta', { desde: '2026-11-02T00:00:00Z', hasta: '2026-11-01T00:00:00Z' }],
    ['desde equal to hasta', { desde: '2026-11-01T00:00:00Z', hasta: '2026-11-01T00:00:00Z' }],
    ['a window over 14 days', { desde: '2026-11-01T00:00:00Z', hasta: '2026-11-15T00:00:00.001Z' }],
    ['desde over 14 days ago, hasta now', { desde: new Date(Date.now() - 15 * 24 * HOUR).toISOString() }],
    ['an unknown field', { desde: '2026-11-01T00:00:00Z', estado: 'fallida' }],
  ])('400 VALIDATION_ERROR for a bad window: %s', async (_case, body) => {
    const webhookId = await hook();
    const res = await api(`/webhooks/${webhookId}/recuperar`, body);
    expect(res.status).toBe(400);
    expect(res.body).toEqual(envelope('VALIDATION_ERROR'));
    expect((await fx.gw.http.delete(`/api/v1/webhooks/${webhookId}`).set('Authorization', bearer(c.live))).status).toBe(200);
  });

  it('takes a window of exactly 14 days, and a date without time', async () => {
    const webhookId = await hook();
    expect((await api(`/webhooks/${webhookId}/recuperar`, { desde: '2026-11-01T00:00:00Z', hasta: '2026-11-15T00:00:00Z' })).status).toBe(202);
    expect((await api(`/webhooks/${webhookId}/recuperar`, { desde: '2026-11-01', hasta: '2026-11-02' })).body).toEqual({ success: true, data: { reenviadas: 0, pendientes: 0 } });
    expect((await fx.gw.http.delete(`/api/v1/webhooks/${webhookId}`).set('Authorization', bearer(c.live))).status).toBe(200);
  });
});
