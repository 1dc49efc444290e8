import { Redis } from 'ioredis';
import { standardSecret, verify } from '@svc/webhook-signature';
import { TEST_REDIS_URL } from '../../../test/support/env';
import { eventually, sleep } from '../../../test/support/eventually';
import type { ReceivedRequest } from '../../../test/support/https-receiver';
import { deletePrefix } from '../../../test/support/redis-prefix';
import { count, createOne, moveOn } from '../../../test/support/shipment-fixtures';
import { acceptedByStandard, verifyStandard } from '../../../test/support/standard-webhooks';
import { bearer, createCompany, type Company } from '../../../test/support/test-gateway';
import { startDispatcherFixture, type DispatcherFixture, type TestDispatcher } from '../../../test/support/test-dispatcher';
import { createWebhook } from '../../../test/support/webhook-fixtures';

/** The reconciler looks only when the test says so, for work 1 s late. */
const MANUAL = { RECONCILE_INTERVAL_MS: '3600000', RECONCILE_GRACE_MS: '1000' };

const bodyOf = (r: ReceivedRequest) => JSON.parse(r.rawBody.toString('utf8')) as { event: string; timestamp: string; webhookId: string; data: Record<string, unknown> };
const header = (r: ReceivedRequest, name: string): string | undefined => {
  const v = r.headers[name];
  return Array.isArray(v) ? v.join(', ') : v;
};

/**
 * Every kind of delivery carries the headers of docs/integrators.md ("Receiving webhooks"), and the `standardwebhooks` npm package
 * itself accepts each one: shipment events, a retry, a PING, resends (of an event and of a PING),
 * work the reconciler rebuilt from Postgres, and webhooks whose secrets predate the whsec_ base64 form.
 */
describe('the headers of every delivery: webhook-id, webhook-timestamp, webhook-signature, X-SVC-Modo, X-SVC-Secuencia', () => {
  let fx: DispatcherFixture;
  let c: Company;
  let dispatcher: TestDispatcher;

  beforeAll(async () => {
    fx = await startDispatcherFixture('headers', {
      dispatchers: 0,
      gateway: { env: { DISPATCH_HOST_MAP: 'receiver.test=127.0.0.1', DISPATCH_ALLOW_CIDRS: '127.0.0.0/8' } },
    });
    dispatcher = await fx.addDispatcher({ env: MANUAL });
    c = await createCompany(fx.gw, { planActivo: true, creditos: 1000 });
  });
  afterAll(() => fx?.stop());

  const api = (method: 'post' | 'delete' | 'get', path: string) => fx.gw.http[method](`/api/v1${path}`).set('Authorization', bearer(c.live));
  const hook = (path: string, eventos: string[] = []) => createWebhook(fx.gw, c.live, fx.receiver.url(path), eventos);
  const retire = async (id: string) => expect((await api('delete', `/webhooks/${id}`)).status).toBe(200);
  const ship = async (): Promise<string> => (await createOne(fx.gw, c.live).expect(201)).body.data.numeroGuia as string;
  const eventIds = async (numeroGuia: string): Promise<Map<string, string>> => {
    const rows = await fx.pool.query<{ id: string; evento: string }>(`select id, evento from outbox where data ->> 'numeroGuia' = $1`, [numeroGuia]);
    return new Map(rows.rows.map((r) => [r.evento, r.id]));
  };
  /** What every delivery carries, whatever its kind. */
  const expectStandard = (r: ReceivedRequest, secret: string): void => {
    const body = bodyOf(r);
    expect(header(r, 'webhook-timestamp')).toBe(String(Math.floor(Date.parse(body.timestamp) / 1000)));
    expect(header(r, 'webhook-signature')).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
    expect(header(r, 'x-svc-modo')).toBe('live');
    expect(verify(r.rawBody, r.headers['x-svc-signature'], secret)).toBe(true);
    expect(verifyStandard(r, secret)).toEqual(body);
  };

  it('a shipment event: webhook-id is the event\'s id for every webhook, X-SVC-Secuencia its place in the history', async () => {
    const a = await hook('/h1');
    const b = await hook('/h2');
    const numeroGuia = await ship();
    expect((await moveOn(fx.gw, numeroGuia, { evento: 'GUIA_RECOLECTADA' })).status).toBe(200);
    expect((await moveOn(fx.gw, numeroGuia, { evento: 'GUIA_EN_BODEGA' })).status).toBe(200);
    await fx.receiver.waitFor(3, 10_000, '/h1');
    await fx.receiver.waitFor(3, 10_000, '/h2');
    const ids = await eventIds(numeroGuia);
    for (const [path, w] of [
      ['/h1', a],
      ['/h2', b],
    ] as const) {
      const got = fx.receiver.requestsTo(path).sort((x, y) => Number(header(x, 'x-svc-secuencia')) - Number(header(y, 'x-svc-secuencia')));
      expect(got.map((r) => [bodyOf(r).event, header(r, 'x-svc-secuencia')])).toEqual([
        ['GUIA_CREADA', '1'],
        ['GUIA_RECOLECTADA', '2'],
        ['GUIA_EN_BODEGA', '3'],
      ]);
      for (const r of got) {
        expect(header(r, 'webhook-id')).toBe(ids.get(bodyOf(r).event));
        expectStandard(r, w.secret);
        // Each webhook verifies with its own secret only.
        expect(acceptedByStandard(r, w === a ? b.secret : a.secret)).toBe(false);
      }
    }
    // The same event: one webhook-id for both webhooks, each delivery its own X-Request-Id.
    const [one] = fx.receiver.requestsTo('/h1').filter((r) => bodyOf(r).event === 'GUIA_CREADA');
    const [two] = fx.receiver.requestsTo('/h2').filter((r) => bodyOf(r).event === 'GUIA_CREADA');
    expect(header(one!, 'webhook-id')).toBe(header(two!, 'webhook-id'));
    expect(header(one!, 'x-request-id')).not.toBe(header(two!, 'x-request-id'));
    await retire(a.id);
    await retire(b.id);
  }, 20_000);

  it('a retry: the same webhook-id and X-SVC-Secuencia, its own webhook-timestamp and signature', async () => {
    fx.receiver.respond('/flaky', [{ status: 500 }, { status: 200 }]);
    const w = await hook('/flaky');
    const numeroGuia = await ship();
    const [first, second] = await fx.receiver.waitFor(2, 10_000, '/flaky');
    expect(header(first!, 'webhook-id')).toBe((await eventIds(numeroGuia)).get('GUIA_CREADA'));
    expect(header(second!, 'webhook-id')).toBe(header(first!, 'webhook-id'));
    expect([header(first!, 'x-svc-secuencia'), header(second!, 'x-svc-secuencia')]).toEqual(['1', '1']);
    expect(Number(header(second!, 'webhook-timestamp'))).toBeGreaterThan(Number(header(first!, 'webhook-timestamp')));
    expect(header(second!, 'webhook-signature')).not.toBe(header(first!, 'webhook-signature'));
    for (const r of [first!, second!]) expectStandard(r, w.secret);
    await retire(w.id);
  }, 15_000);

  it('a PING: webhook-id is the PING delivery\'s own id, no X-SVC-Secuencia', async () => {
    const w = await hook('/ping');
    expect((await api('post', `/webhooks/${w.id}/test`)).body.data).toMatchObject({ exitoso: true });
    const [r] = fx.receiver.requestsTo('/ping');
    expect(header(r!, 'webhook-id')).toBe(bodyOf(r!).webhookId);
    expect(header(r!, 'webhook-id')).toBe(header(r!, 'x-request-id'));
    expect(header(r!, 'x-svc-secuencia')).toBeUndefined();
    expectStandard(r!, w.secret);
    await retire(w.id);
  });

  it('resends, and work the reconciler rebuilt from Postgres, carry the same headers as the original', async () => {
    fx.receiver.respond('/again', { status: 500 });
    const w = await hook('/again');
    const numeroGuia = await ship();
    expect((await moveOn(fx.gw, numeroGuia, { evento: 'GUIA_ANULADA' })).status).toBe(200);
    expect((await api('post', `/webhooks/${w.id}/test`)).body.data).toMatchObject({ exitoso: false });
    await eventually(async () => (await count(fx.pool, `select count(*) n from entregas where webhook_id = $1 and estado = 'fallida'`, [w.id])) === 3, 15_000, 'all failed');
    const failed = (await api('get', `/webhooks/${w.id}/entregas`)).body.data.entregas as Array<{ id: string; evento: string; eventoId: string }>;
    const anulada = failed.find((d) => d.evento === 'GUIA_ANULADA')!;
    const ping = failed.find((d) => d.evento === 'PING')!;

    // Resent with no dispatcher running, and Redis loses the jobs: the reconciler rebuilds them.
    await dispatcher.stop();
    fx.receiver.respond('/again', { status: 200 });
    for (const d of [anulada, ping]) expect((await api('post', `/webhooks/${w.id}/entregas/${d.id}/reenviar`)).status).toBe(202);
    const redis = new Redis(TEST_REDIS_URL);
    try {
      await deletePrefix(redis, fx.prefix);
    } finally {
      redis.disconnect();
    }
    await sleep(1200); // the grace (1 s) passes
    const sent = fx.receiver.requestsTo('/again').length;
    dispatcher = await fx.addDispatcher({ env: MANUAL });
    expect(await dispatcher.reconciler.runOnce()).toEqual({ events: 0, deliveries: 2 });
    const resent = (await fx.receiver.waitFor(sent + 2, 10_000, '/again')).slice(sent);
    const byEvent = new Map(resent.map((r) => [bodyOf(r).event, r]));
    const event = byEvent.get('GUIA_ANULADA')!;
    expect(header(event, 'webhook-id')).toBe(anulada.eventoId);
    expect(header(event, 'x-svc-secuencia')).toBe('2');
    expect(bodyOf(event).data).toEqual({ numeroGuia, estado: 'ANULADA' });
    expectStandard(event, w.secret);
    const pinged = byEvent.get('PING')!;
    expect(header(pinged, 'webhook-id')).toBe(ping.id);
    expect(header(pinged, 'x-svc-secuencia')).toBeUndefined();
    expect(bodyOf(pinged).data).toEqual({});
    expectStandard(pinged, w.secret);
    await retire(w.id);
  }, 30_000);

  it.each([
    ['whsec_ + URL-safe base64 (issued before the standard form)', `whsec_${Buffer.from('fbef'.repeat(16), 'hex').toString('base64url')}`],
    ['not whsec_ at all', 'an-older-plain-secret'],
  ])('a webhook whose secret is %s: verified with the documented key', async (_case, legacy) => {
    const w = await hook(`/legacy-${legacy.length}`);
    // Written in plaintext as a version before sealing did, then sealed as the gateway's upkeep does.
    await fx.pool.query('update webhooks set secret = $2 where id = $1', [w.id, legacy]);
    expect(await fx.gw.secretsUpkeep.runOnce()).toMatchObject({ sealed: 1 });
    expect((await fx.pool.query<{ secret: string }>('select secret from webhooks where id = $1', [w.id])).rows[0]!.secret).toMatch(/^v1:/);
    await sleep(1100); // past the dispatcher's one-second reuse of a webhook's secrets
    await ship();
    const [r] = await fx.receiver.waitFor(1, 10_000, `/legacy-${legacy.length}`);
    expect(verify(r!.rawBody, r!.headers['x-svc-signature'], legacy)).toBe(true);
    // The package verifies it with the secret rewritten in the standard form (same key), or raw.
    expect(verifyStandard(r!, standardSecret(legacy))).toEqual(bodyOf(r!));
    if (!legacy.startsWith('whsec_')) expect(verifyStandard(r!, legacy, { format: 'raw' })).toEqual(bodyOf(r!));
    await retire(w.id);
  }, 15_000);
});
