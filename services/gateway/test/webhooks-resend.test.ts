import { randomUUID } from 'node:crypto';
import { verify } from '@svc/webhook-signature';
import type { ReceivedRequest } from '../../../test/support/https-receiver';
import { eventually } from '../../../test/support/eventually';
import { createOne } from '../../../test/support/shipment-fixtures';
import { verifyStandard } from '../../../test/support/standard-webhooks';
import { bearer, createBranch, createCompany, type Company } from '../../../test/support/test-gateway';
import { startDispatcherFixture, type DispatcherFixture } from '../../../test/support/test-dispatcher';
import { createWebhook, type EntregaDetalle } from '../../../test/support/webhook-fixtures';

const ENTREGA_DETALLE_KEYS = [
  'createdAt',
  'estado',
  'evento',
  'eventoId',
  'exitoso',
  'id',
  'intentos',
  'intentosDetalle',
  'numeroGuia',
  'reenvioDe',
  'statusCode',
  'ultimoIntentoEn',
].sort();
const envelope = (code: string) => ({ success: false, error: { code, message: expect.any(String) } });
const bodyOf = (r: ReceivedRequest) => JSON.parse(r.rawBody.toString('utf8')) as { event: string; webhookId: string; timestamp: string; data: Record<string, unknown> };

describe('resending and recovery (POST /webhooks/{id}/entregas/{entregaId}/reenviar, /webhooks/{id}/recuperar)', () => {
  let fx: DispatcherFixture;
  let c: Company;

  beforeAll(async () => {
    // The gateway sends PINGs: it reaches the loopback receiver as the dispatchers do.
    fx = await startDispatcherFixture('resend', {
      gateway: { env: { DISPATCH_HOST_MAP: 'receiver.test=127.0.0.1', DISPATCH_ALLOW_CIDRS: '127.0.0.0/8' } },
    });
    c = await createCompany(fx.gw, { planActivo: true, creditos: 1000, sucursalesHabilitadas: true });
  });
  afterAll(() => fx?.stop());

  const api = (method: 'get' | 'post' | 'patch' | 'delete', path: string, body?: unknown, token = c.live) => {
    const r = fx.gw.http[method](`/api/v1${path}`).set('Authorization', bearer(token));
    return body === undefined ? r : r.send(body as object);
  };
  const hook = (path: string, eventos: string[] = []) => createWebhook(fx.gw, c.live, fx.receiver.url(path), eventos);
  const retire = async (id: string) => expect((await api('delete', `/webhooks/${id}`)).status).toBe(200);
  const ship = async (): Promise<string> => (await createOne(fx.gw, c.live).expect(201)).body.data.numeroGuia as string;
  const log = async (webhookId: string): Promise<EntregaDetalle[]> => {
    const res = await api('get', `/webhooks/${webhookId}/entregas?limit=100`);
    expect(res.status).toBe(200);
    return res.body.data.entregas as EntregaDetalle[];
  };
  const one = async (webhookId: string, id: string): Promise<EntregaDetalle> => (await api('get', `/webhooks/${webhookId}/entregas/${id}`)).body.data as EntregaDetalle;
  const settled = async (webhookId: string, id: string, estado: 'exitosa' | 'fallida', timeoutMs = 15_000): Promise<EntregaDetalle> => {
    await eventually(async () => (await one(webhookId, id)).estado === estado, timeoutMs, `delivery ${id} ${estado}`);
    return one(webhookId, id);
  };
  /** Every delivery of the webhook has ended (none pending), and there are `n` of them. */
  const allSettled = async (webhookId: string, n: number): Promise<EntregaDetalle[]> => {
    await eventually(async () => {
      const all = await log(webhookId);
      return all.length === n && all.every((d) => d.estado !== 'pendiente');
    }, 20_000, `${n} deliveries ended`);
    return log(webhookId);
  };
  const resend = (webhookId: string, entregaId: string, token = c.live) => api('post', `/webhooks/${webhookId}/entregas/${entregaId}/reenviar`, undefined, token);

  it('resends a failed delivery now, to the current URL with the current secret: a new delivery of the same event and data', async () => {
    fx.receiver.respond('/down', { status: 500 });
    fx.receiver.respond('/up', { status: 200 });
    const w = await hook('/down', ['GUIA_CREADA']);
    const numeroGuia = await ship();
    const [first] = await allSettled(w.id, 1);
    expect(first).toMatchObject({ estado: 'fallida', intentos: 3, numeroGuia, reenvioDe: null });
    const [originalRequest] = fx.receiver.requestsTo('/down');

    expect((await api('patch', `/webhooks/${w.id}`, { url: fx.receiver.url('/up') })).status).toBe(200);
    const res = await resend(w.id, first!.id);
    expect(res.status).toBe(202);
    const created = res.body.data as EntregaDetalle;
    expect(Object.keys(created).sort()).toEqual(ENTREGA_DETALLE_KEYS);
    expect(created).toEqual({
      id: expect.any(String),
      evento: 'GUIA_CREADA',
      exitoso: false,
      statusCode: 0,
      intentos: 0,
      ultimoIntentoEn: null,
      createdAt: expect.any(String),
      estado: 'pendiente',
      eventoId: first!.eventoId,
      numeroGuia,
      reenvioDe: first!.id,
      intentosDetalle: [],
    });
    expect(created.id).not.toBe(first!.id);

    const [req] = await fx.receiver.waitFor(1, 5_000, '/up');
    const body = bodyOf(req!);
    // A new delivery id (payload webhookId, X-Request-Id); the same event (webhook-id, data, sequence).
    expect(body).toMatchObject({ event: 'GUIA_CREADA', webhookId: created.id, data: bodyOf(originalRequest!).data });
    expect(req!.headers['x-request-id']).toBe(created.id);
    expect(req!.headers['webhook-id']).toBe(first!.eventoId);
    expect(req!.headers['webhook-id']).toBe(originalRequest!.headers['webhook-id']);
    expect(req!.headers['x-svc-secuencia']).toBe('1');
    expect(req!.headers['x-svc-modo']).toBe('live');
    expect(verify(req!.rawBody, req!.headers['x-svc-signature'], w.secret)).toBe(true);
    expect(verifyStandard(req!, w.secret)).toEqual(body);

    const done = await settled(w.id, created.id, 'exitosa');
    expect(done).toMatchObject({ exitoso: true, statusCode: 200, intentos: 1, reenvioDe: first!.id, eventoId: first!.eventoId });
    expect(await one(w.id, first!.id)).toEqual(first);
    await retire(w.id);
  }, 30_000);

  it('gives a resend the usual 3 attempts, and a failed resend is resent in turn by reenviar, keeping the event', async () => {
    fx.receiver.respond('/never', { status: 503 });
    const w = await hook('/never', ['GUIA_CREADA']);
    await ship();
    const [original] = await allSettled(w.id, 1);
    const again = (await resend(w.id, original!.id)).body.data as EntregaDetalle;
    const failed = await settled(w.id, again.id, 'fallida');
    expect(failed).toMatchObject({ intentos: 3, statusCode: 503, reenvioDe: original!.id, eventoId: original!.eventoId });
    const attempts = fx.receiver.requestsTo('/never').filter((r) => bodyOf(r).webhookId === again.id);
    expect(attempts).toHaveLength(3);
    // Each attempt: the same delivery and event, the same sequence, its own time; all verifiable.
    expect(new Set(attempts.map((r) => r.headers['webhook-id']))).toEqual(new Set([original!.eventoId]));
    expect(attempts.map((r) => r.headers['x-svc-secuencia'])).toEqual(['1', '1', '1']);
    for (const r of attempts) expect(() => verifyStandard(r, w.secret)).not.toThrow();

    const third = await resend(w.id, again.id);
    expect(third.status).toBe(202);
    expect(third.body.data).toMatchObject({ reenvioDe: again.id, eventoId: original!.eventoId, estado: 'pendiente' });
    await settled(w.id, (third.body.data as EntregaDetalle).id, 'fallida');
    await retire(w.id);
  }, 40_000);

  it('resends a PING: webhook-id is the PING delivery\'s own id, data {}, no X-SVC-Secuencia', async () => {
    fx.receiver.respond('/ping-later', [{ status: 500 }, { status: 200 }]);
    const w = await hook('/ping-later');
    const ping = await api('post', `/webhooks/${w.id}/test`);
    expect(ping.body.data).toMatchObject({ exitoso: false, statusCode: 500 });
    const [original] = await log(w.id);
    expect(original).toMatchObject({ evento: 'PING', estado: 'fallida', eventoId: original!.id });
    const [first] = fx.receiver.requestsTo('/ping-later');
    expect(first!.headers['webhook-id']).toBe(original!.id);

    const res = await resend(w.id, original!.id);
    expect(res.status).toBe(202);
    const created = res.body.data as EntregaDetalle;
    expect(created).toMatchObject({ evento: 'PING', eventoId: original!.id, numeroGuia: null, reenvioDe: original!.id, estado: 'pendiente' });
    const [, req] = await fx.receiver.waitFor(2, 5_000, '/ping-later');
    expect(bodyOf(req!)).toEqual({ event: 'PING', timestamp: expect.any(String), webhookId: created.id, data: {} });
    expect(req!.headers['webhook-id']).toBe(original!.id);
    expect(req!.headers['x-svc-secuencia']).toBeUndefined();
    expect(req!.headers['x-svc-modo']).toBe('live');
    expect(() => verifyStandard(req!, w.secret)).not.toThrow();
    expect(await settled(w.id, created.id, 'exitosa')).toMatchObject({ intentos: 1, eventoId: original!.id });
    await retire(w.id);
  }, 20_000);

  it('409 DELIVERY_PENDING while the delivery has attempts left; 409 WEBHOOK_INACTIVE on an inactive webhook', async () => {
    fx.receiver.respond('/codes', { status: 500 });
    const w = await hook('/codes');
    await api('post', `/webhooks/${w.id}/test`);
    const [failed] = await log(w.id);
    // A delivery waiting for its next attempt (no due time: the reconciler leaves it alone).
    const pending = randomUUID();
    await fx.pool.query(`insert into entregas (id, webhook_id, evento, estado, created_at) values ($1, $2, 'PING', 'pendiente', now())`, [pending, w.id]);
    const busy = await resend(w.id, pending);
    expect(busy.status).toBe(409);
    expect(busy.body).toEqual(envelope('DELIVERY_PENDING'));

    await retire(w.id);
    for (const res of [await resend(w.id, failed!.id), await api('post', `/webhooks/${w.id}/recuperar`, { desde: '2026-01-01T00:00:00Z', hasta: '2026-01-02T00:00:00Z' })]) {
      expect(res.status).toBe(409);
      expect(res.body).toEqual(envelope('WEBHOOK_INACTIVE'));
    }
    expect((await log(w.id)).filter((d) => d.reenvioDe !== null)).toHaveLength(0);
  });

  it('403 FORBIDDEN for a branch token; 404 NOT_FOUND for an unknown or malformed id, another webhook\'s delivery, another company', async () => {
    const branch = await createBranch(fx.gw, c.id);
    const other = await createCompany(fx.gw);
    fx.receiver.respond('/codes2', { status: 500 });
    const w = await hook('/codes2');
    const w2 = await hook('/codes3');
    await api('post', `/webhooks/${w.id}/test`);
    const [failed] = await log(w.id);
    const window = { desde: new Date(Date.now() - 3600_000).toISOString() };

    for (const res of [await resend(w.id, failed!.id, branch.live), await api('post', `/webhooks/${w.id}/recuperar`, window, branch.live)]) {
      expect(res.status).toBe(403);
      expect(res.body).toEqual(envelope('FORBIDDEN'));
    }
    for (const res of [
      await resend(w.id, randomUUID()),
      await resend(w.id, 'not-a-uuid'),
      await resend(w2.id, failed!.id),
      await resend(randomUUID(), failed!.id),
      await resend(w.id, failed!.id, other.live),
      await api('post', `/webhooks/${randomUUID()}/recuperar`, window),
      await api('post', `/webhooks/${w.id}/recuperar`, window, other.live),
    ]) {
      expect(res.status).toBe(404);
      expect(res.body).toEqual(envelope('NOT_FOUND'));
    }
    expect((await log(w.id)).filter((d) => d.reenvioDe !== null)).toHaveLength(0);
    await retire(w.id);
    await retire(w2.id);
  });

  it('recovers a window with a mix of failed, resent and successful deliveries: each failed original once, then nothing again', async () => {
    fx.receiver.respond('/mixed', { status: 500 });
    const w = await hook('/mixed', ['GUIA_CREADA']);
    // Before the window: a failed delivery it must not touch.
    await ship();
    const [before] = await allSettled(w.id, 1);
    await new Promise((r) => setTimeout(r, 20));
    const desde = new Date().toISOString();

    // Failed: four shipment events and a PING.
    for (let i = 0; i < 4; i++) await ship();
    await api('post', `/webhooks/${w.id}/test`);
    const failed = (await allSettled(w.id, 6)).filter((d) => d.createdAt >= desde);
    expect(failed.map((d) => d.estado)).toEqual(['fallida', 'fallida', 'fallida', 'fallida', 'fallida']);
    const ping = failed.find((d) => d.evento === 'PING');
    const [a, b, ...rest] = failed.filter((d) => d.evento !== 'PING');
    expect(rest).toHaveLength(2);
    // A resend that fails (b → b'), then the receiver recovers: a resend that succeeds (a → a'), and successes.
    const bResend = (await resend(w.id, b!.id)).body.data as EntregaDetalle;
    await settled(w.id, bResend.id, 'fallida');
    fx.receiver.respond('/mixed', { status: 200 });
    const aResend = (await resend(w.id, a!.id)).body.data as EntregaDetalle;
    await settled(w.id, aResend.id, 'exitosa');
    await ship();
    await ship();
    const everything = await allSettled(w.id, 10);
    expect(everything.filter((d) => d.estado === 'exitosa')).toHaveLength(3);

    const received = fx.receiver.requestsTo('/mixed').length;
    const res = await api('post', `/webhooks/${w.id}/recuperar`, { desde });
    expect(res.status).toBe(202);
    // The PING and the two shipment events never resent; not b' (a resend), not a or b (resent), not the successes.
    expect(res.body).toEqual({ success: true, data: { reenviadas: 3, pendientes: 0 } });
    const expected = [ping!, ...rest];
    const after = await allSettled(w.id, 13);
    const resends = after.filter((d) => d.reenvioDe !== null && d.id !== aResend.id && d.id !== bResend.id);
    expect(resends.map((d) => d.reenvioDe).sort()).toEqual(expected.map((d) => d.id).sort());
    for (const d of resends) {
      const original = expected.find((o) => o.id === d.reenvioDe)!;
      expect(d).toMatchObject({ estado: 'exitosa', evento: original.evento, eventoId: original.eventoId, numeroGuia: original.numeroGuia });
    }
    const arrived = fx.receiver.requestsTo('/mixed').slice(received);
    expect(arrived.map((r) => r.headers['webhook-id']).sort()).toEqual(expected.map((d) => d.eventoId).sort());
    for (const r of arrived) expect(() => verifyStandard(r, w.secret)).not.toThrow();
    expect(after.some((d) => d.reenvioDe === before!.id)).toBe(false);

    // The same window again: nothing left to resend.
    const again = await api('post', `/webhooks/${w.id}/recuperar`, { desde, hasta: new Date().toISOString() });
    expect(again.body).toEqual({ success: true, data: { reenviadas: 0, pendientes: 0 } });
    await new Promise((r) => setTimeout(r, 300));
    expect(await log(w.id)).toHaveLength(13);
    expect(fx.receiver.requestsTo('/mixed')).toHaveLength(received + 3);
    await retire(w.id);
  }, 60_000);
});
