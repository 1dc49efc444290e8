import { randomUUID } from 'node:crypto';
import type { Queue } from 'bullmq';
import { JOBS, type DeliveryJob } from '@svc/contracts';
import { RESENDS_PER_HOUR } from '../src/deliveries/resend.limiter';
import { count } from '../../../test/support/shipment-fixtures';
import { openPortal } from '../../../test/support/portal-session';
import { testRedisClient } from '../../../test/support/redis-prefix';
import { testKeyPrefix } from '../../../test/support/env';
import { bearer, createCompany, startGatewayFixture, type Company, type GatewayFixture, type TestGateway } from '../../../test/support/test-gateway';

const envelope = (code: string) => ({ success: false, error: { code, message: expect.any(String) } });

/**
 * `reenviar` is limited per hour (issue 28): RESENDS_PER_HOUR resends of one event to one webhook
 * in a sliding hour, counted in Redis (every gateway, the API and the portal alike), whichever of the
 * event's deliveries is resent; past it 429 RESEND_LIMIT_EXCEEDED with `Retry-After`. No dispatcher:
 * failed deliveries are written straight into Postgres.
 */
describe('POST /api/v1/webhooks/{id}/entregas/{entregaId}/reenviar: limited per hour', () => {
  let fx: GatewayFixture;
  let c: Company;
  let queue: Queue<DeliveryJob>;

  beforeAll(async () => {
    fx = await startGatewayFixture('resendlimit', { env: { RATE_LIMIT_PER_MINUTE: '100000' } });
    c = await createCompany(fx.gw, { nombre: 'Reenvíos' });
    queue = fx.queue<DeliveryJob>(JOBS.delivery.queue);
  });
  afterAll(() => fx?.stop());

  const resend = (webhookId: string, entregaId: string, gw: TestGateway = fx.gw) =>
    gw.http.post(`/api/v1/webhooks/${webhookId}/entregas/${entregaId}/reenviar`).set('Authorization', bearer(c.live));
  const hook = async (): Promise<string> => {
    const res = await fx.gw.http.post('/api/v1/webhooks').set('Authorization', bearer(c.live)).send({ url: 'https://receiver.test/hook' });
    if (res.status !== 201) throw new Error(`${res.status} ${JSON.stringify(res.body)}`);
    return res.body.data.id as string;
  };
  /** A delivery of a new event to each webhook given (in that state); returns the deliveries' ids, in order. */
  const deliveriesOfOneEvent = async (webhookIds: string[], estado: 'fallida' | 'pendiente' | 'exitosa' = 'fallida'): Promise<string[]> => {
    const eventId = randomUUID();
    await fx.pool.query(
      `insert into outbox (id, empresa_id, evento, data, created_at, enviado_en, repartido_en, secuencia, modo)
       values ($1, $2, 'GUIA_CREADA', '{"numeroGuia":"SVC0000000001","estado":"CREADA"}', now(), now(), now(), 1, 'live')`,
      [eventId, c.id],
    );
    const ids: string[] = [];
    for (const webhookId of webhookIds) {
      const id = randomUUID();
      await fx.pool.query(
        `insert into entregas (id, webhook_id, evento_id, evento, estado, exitoso, status_code, intentos, ultimo_intento_en, numero_guia)
         values ($1, $2, $3, 'GUIA_CREADA', $4, $4 = 'exitosa', 500, 3, now(), 'SVC0000000001')`,
        [id, webhookId, eventId, estado],
      );
      ids.push(id);
    }
    return ids;
  };
  const resendsOfEvent = (webhookId: string, original: string) =>
    count(fx.pool, `select count(*) n from entregas where webhook_id = $1 and es_reenvio and evento_id = (select evento_id from entregas where id = $2)`, [webhookId, original]);

  it(`resends one event ${RESENDS_PER_HOUR} times an hour to a webhook, then 429 RESEND_LIMIT_EXCEEDED with Retry-After, writing and queueing nothing`, async () => {
    expect(RESENDS_PER_HOUR).toBe(10);
    const webhookId = await hook();
    const [original] = await deliveriesOfOneEvent([webhookId]);
    for (let i = 0; i < RESENDS_PER_HOUR; i++) expect((await resend(webhookId, original!)).status).toBe(202);
    const refused = await resend(webhookId, original!);
    expect(refused.status).toBe(429);
    expect(refused.body).toEqual(envelope('RESEND_LIMIT_EXCEEDED'));
    // The hour slides from the first resend: about an hour to wait.
    const retryAfter = Number(refused.headers['retry-after']);
    expect(retryAfter).toBeGreaterThan(3500);
    expect(retryAfter).toBeLessThanOrEqual(3600);
    // The token's own window is another matter: its headers are there, with room left.
    expect(Number(refused.headers['x-ratelimit-remaining'])).toBeGreaterThan(0);
    expect(await resendsOfEvent(webhookId, original!)).toBe(RESENDS_PER_HOUR);
    expect(await count(fx.pool, `select count(*) n from actividad where webhook_id = $1 and accion = 'delivery.resent'`, [webhookId])).toBe(RESENDS_PER_HOUR);
    await fx.gw.deps.resendRelay.drain();
    const jobs = (await queue.getJobs(['waiting', 'prioritized', 'delayed'], 0, -1)).filter((j) => j.data.webhookId === webhookId);
    expect(jobs).toHaveLength(RESENDS_PER_HOUR);

    // The window is in Redis, under the prefix, for an hour.
    const redis = testRedisClient();
    try {
      const keys = await redis.keys(`${testKeyPrefix(fx.prefix)}:resend:${webhookId}:*`);
      expect(keys).toHaveLength(1);
      const ttl = await redis.pttl(keys[0]!);
      expect(ttl).toBeGreaterThan(3_500_000);
      expect(ttl).toBeLessThanOrEqual(3_600_000);
    } finally {
      await redis.quit();
    }
  });

  it('counts the event, whichever of its deliveries is resent, on every gateway and through the portal', async () => {
    const webhookId = await hook();
    const [original] = await deliveriesOfOneEvent([webhookId]);
    const second = await fx.addGateway({ env: { RATE_LIMIT_PER_MINUTE: '100000' } });
    const portal = await openPortal(fx.gw, c.id);
    let lastResend = '';
    for (let i = 0; i < RESENDS_PER_HOUR - 1; i++) {
      const res = await resend(webhookId, original!, i % 2 === 0 ? fx.gw : second);
      expect(res.status).toBe(202);
      lastResend = res.body.data.id as string;
    }
    // A resend of a resend is the same event: the tenth goes through, the eleventh not.
    await fx.pool.query(`update entregas set estado = 'fallida', intentos = 3, ultimo_intento_en = now() where id = $1`, [lastResend]);
    expect((await resend(webhookId, lastResend, second)).status).toBe(202);
    expect((await resend(webhookId, lastResend)).body).toEqual(envelope('RESEND_LIMIT_EXCEEDED'));
    const viaPortal = await portal.send('post', `/webhooks/${webhookId}/entregas/${original!}/reenviar?modo=live`);
    expect(viaPortal.status).toBe(429);
    expect(viaPortal.body).toEqual(envelope('RESEND_LIMIT_EXCEEDED'));
    expect(Number(viaPortal.headers['retry-after'])).toBeGreaterThan(0);
    expect(await resendsOfEvent(webhookId, original!)).toBe(RESENDS_PER_HOUR);
    await fx.gw.deps.resendRelay.drain();
    await second.deps.resendRelay.drain();
  });

  it("keeps each event's and each webhook's hour apart, and a refused resend (pending, inactive, unknown) costs none of it", async () => {
    const [a, b] = [await hook(), await hook()];
    // One event delivered to two webhooks; the first's hour used up.
    const [onA, onB] = await deliveriesOfOneEvent([a, b]);
    for (let i = 0; i < RESENDS_PER_HOUR; i++) expect((await resend(a, onA!)).status).toBe(202);
    expect((await resend(a, onA!)).status).toBe(429);
    expect((await resend(b, onB!)).status).toBe(202);
    const [otherEvent] = await deliveriesOfOneEvent([a]);
    expect((await resend(a, otherEvent!)).status).toBe(202);

    // Refusals before the count: twenty of each, and the hour is still whole.
    const [pending] = await deliveriesOfOneEvent([a], 'pendiente');
    for (let i = 0; i < 2 * RESENDS_PER_HOUR; i++) {
      expect((await resend(a, pending!)).body).toEqual(envelope('DELIVERY_PENDING'));
      expect((await resend(a, randomUUID())).body).toEqual(envelope('NOT_FOUND'));
    }
    await fx.pool.query(`update entregas set estado = 'fallida' where id = $1`, [pending]);
    const c2 = await hook();
    const [inactive] = await deliveriesOfOneEvent([c2]);
    expect((await fx.gw.http.delete(`/api/v1/webhooks/${c2}`).set('Authorization', bearer(c.live))).status).toBe(200);
    for (let i = 0; i < 2 * RESENDS_PER_HOUR; i++) expect((await resend(c2, inactive!)).body).toEqual(envelope('WEBHOOK_INACTIVE'));
    expect((await fx.gw.http.patch(`/api/v1/webhooks/${c2}`).set('Authorization', bearer(c.live)).send({ activo: true })).status).toBe(200);
    for (const [webhookId, delivery] of [[a, pending!], [c2, inactive!]] as const) {
      for (let i = 0; i < RESENDS_PER_HOUR; i++) expect((await resend(webhookId, delivery)).status).toBe(202);
      expect((await resend(webhookId, delivery)).status).toBe(429);
    }
    await fx.gw.deps.resendRelay.drain();
  }, 60_000);
});
