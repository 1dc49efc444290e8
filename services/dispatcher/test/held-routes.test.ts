import { Redis } from 'ioredis';
import { JOBS, type ShipmentEventJob } from '@svc/contracts';
import { TEST_REDIS_URL } from '../../../test/support/env';
import { eventually } from '../../../test/support/eventually';
import { acceptedByStandard } from '../../../test/support/standard-webhooks';
import { count, createOne, guia } from '../../../test/support/shipment-fixtures';
import { bearer, createCompany, type Company } from '../../../test/support/test-gateway';
import { createWebhook } from '../../../test/support/webhook-fixtures';
import { startDispatcherFixture, type DispatcherFixture } from '../../../test/support/test-dispatcher';
import type { ReceivedRequest } from '../../../test/support/https-receiver';
import { createRoutesCache, type RouteKey } from '../src/webhooks/routes.cache';

const key = (companyId: string, event: RouteKey['event'] = 'GUIA_CREADA'): RouteKey => ({ companyId, mode: 'live', branchId: null, event });

describe('routes cache', () => {
  it('answers an event only with routes read at its count or later, and never goes back to an older read', () => {
    const cache = createRoutesCache<string>({ companies: 10, keysPerCompany: 10 });
    expect(cache.get(key('a'), 0)).toBeUndefined();
    cache.put(key('a'), 3, ['w1']);
    expect(cache.get(key('a'), 3)).toEqual(['w1']);
    expect(cache.get(key('a'), 2)).toEqual(['w1']);
    // A change the held routes do not have: the event must read.
    expect(cache.get(key('a'), 4)).toBeUndefined();
    // A read older than the one held (a batch that started earlier and ended later) is dropped.
    cache.put(key('a'), 2, ['stale']);
    expect(cache.get(key('a'), 3)).toEqual(['w1']);
    // A later read replaces every key of the company: the other keys were read at the older count.
    cache.put(key('a', 'GUIA_ENTREGADA'), 3, ['w1']);
    cache.put(key('a'), 5, ['w1', 'w2']);
    expect(cache.get(key('a'), 5)).toEqual(['w1', 'w2']);
    expect(cache.get(key('a', 'GUIA_ENTREGADA'), 5)).toBeUndefined();
    // Routes to nowhere are held too.
    cache.put(key('b'), 0, []);
    expect(cache.get(key('b'), 0)).toEqual([]);
  });

  it('keeps at most its limits: the least recently used company goes first', () => {
    const cache = createRoutesCache<string>({ companies: 2, keysPerCompany: 2 });
    cache.put(key('a'), 1, ['a']);
    cache.put(key('b'), 1, ['b']);
    expect(cache.get(key('a'), 1)).toEqual(['a']);
    cache.put(key('c'), 1, ['c']);
    expect(cache.get(key('b'), 1)).toBeUndefined();
    expect(cache.get(key('a'), 1)).toEqual(['a']);
    expect(cache.get(key('c'), 1)).toEqual(['c']);
    cache.put(key('a', 'GUIA_ENTREGADA'), 1, ['a2']);
    cache.put(key('a', 'GUIA_DEVOLUCION'), 1, ['a3']);
    expect(cache.get(key('a', 'GUIA_DEVOLUCION'), 1)).toEqual(['a3']);
    expect([cache.get(key('a'), 1), cache.get(key('a', 'GUIA_ENTREGADA'), 1)]).toEqual([undefined, undefined]);
  });
});

/**
 * The fan-out routes an event from the routes it holds (issue 16) only when that is exact: every
 * change to the company's webhooks committed before the event applies to it, as when each event
 * read `webhooks`.
 */
describe('dispatcher: held routes', () => {
  let fx: DispatcherFixture;
  let company: Company;

  beforeEach(async () => {
    fx = await startDispatcherFixture('held-routes');
    company = await createCompany(fx.gw, { planActivo: true, creditos: 1000 });
  });
  afterEach(async () => {
    await fx?.stop();
  });

  /** Creates a shipment, waits for its GUIA_CREADA to be fanned out, and checks where it went; returns what arrived for it. */
  async function ship(expected: string[]): Promise<ReceivedRequest[]> {
    const res = await createOne(fx.gw, company.live, guia());
    expect(res.status).toBe(201);
    const numeroGuia = (res.body as { data: { numeroGuia: string } }).data.numeroGuia;
    // Fanned out: every first attempt has been made (sent, then recorded).
    await eventually(
      async () => (await count(fx.pool, `select count(*) n from outbox where data->>'numeroGuia' = $1 and repartido_en is not null`, [numeroGuia])) === 1,
      10_000,
      `${numeroGuia} fanned out`,
    );
    const received = fx.receiver.requests.filter((r) => r.rawBody.toString('utf8').includes(numeroGuia));
    expect(received.map((r) => r.path).sort()).toEqual([...expected].sort());
    return received;
  }

  it('applies each change to the next event: a new webhook, a new URL, a rotated secret, a deactivation', async () => {
    const a = await createWebhook(fx.gw, company.live, fx.receiver.url('/a'));
    await ship(['/a']);
    await ship(['/a']);

    const b = await createWebhook(fx.gw, company.live, fx.receiver.url('/b'));
    await ship(['/a', '/b']);

    const moved = await fx.gw.http.patch(`/api/v1/webhooks/${b.id}`).set('Authorization', bearer(company.live)).send({ url: fx.receiver.url('/b2') });
    expect(moved.status).toBe(200);
    await ship(['/a', '/b2']);

    const rotated = await fx.gw.http.post(`/api/v1/webhooks/${a.id}/secreto`).set('Authorization', bearer(company.live)).send({ solaparHoras: 0 });
    expect(rotated.status).toBe(200);
    const newSecret = (rotated.body as { data: { secret: string } }).data.secret;
    const signed = (await ship(['/a', '/b2'])).find((r) => r.path === '/a')!;
    expect(acceptedByStandard(signed, newSecret)).toBe(true);
    expect(acceptedByStandard(signed, a.secret)).toBe(false);

    const removed = await fx.gw.http.delete(`/api/v1/webhooks/${a.id}`).set('Authorization', bearer(company.live));
    expect(removed.status).toBe(200);
    await ship(['/b2']);

    const subscribed = await fx.gw.http.patch(`/api/v1/webhooks/${b.id}`).set('Authorization', bearer(company.live)).send({ eventos: ['GUIA_ENTREGADA'] });
    expect(subscribed.status).toBe(200);
    await ship([]);
  }, 60_000);

  it('reads on a run after the first: an earlier run may have recorded what the held routes would send again', async () => {
    await createWebhook(fx.gw, company.live, fx.receiver.url('/a'));
    await ship(['/a']);
    const [second] = await ship(['/a']);
    const eventId = second!.headers['webhook-id'] as string;
    const queue = fx.queue<ShipmentEventJob>(JOBS.shipmentEvent.queue);
    const done = await queue.getJob(eventId);
    expect(done?.data.webhooksVersion).toBe(1);

    // The same counted job again, as a second start of it (a retry, a stalled job): BullMQ counts
    // starts in the job's `ats`, which the delay leaves time to set before the worker takes it.
    await queue.remove(eventId);
    await queue.add(JOBS.shipmentEvent.name, done!.data, { ...JOBS.shipmentEvent.options, jobId: eventId, delay: 500 });
    const redis = new Redis(TEST_REDIS_URL);
    try {
      await redis.hincrby(queue.toKey(eventId), 'ats', 1);
    } finally {
      redis.disconnect();
    }
    await eventually(async () => (await queue.getJobState(eventId)) === 'completed', 10_000, 'the second run');
    expect((await queue.getJob(eventId))?.attemptsStarted).toBe(2);
    // It read, found the delivery recorded, and sent nothing.
    expect(fx.receiver.requests.filter((r) => r.headers['webhook-id'] === eventId)).toHaveLength(1);
    const routed = (await fx.dispatcher.metrics.registry.getSingleMetric('svc_fanout_routes_total')!.get()).values;
    expect(Object.fromEntries(routed.map((v) => [v.labels.source, v.value]))).toEqual({ held: 1, read: 2 });
  }, 30_000);

  it('takes held routes only on an event job that carries its count, on its first run', async () => {
    await createWebhook(fx.gw, company.live, fx.receiver.url('/a'));
    await ship(['/a']);
    await ship(['/a']);
    // A change the count does not see (the trigger off, as no writer may do): only an event routed
    // from held routes misses it, which shows which events are.
    await fx.pool.query('alter table webhooks disable trigger webhooks_version_trg');
    await fx.pool.query(`update webhooks set url = $1 where empresa_id = $2`, [fx.receiver.url('/moved'), company.id]);
    await fx.pool.query('alter table webhooks enable trigger webhooks_version_trg');
    await ship(['/a']);

    // An event the reconciler queues again from `outbox` carries no count: it reads.
    const lost = await fx.pool.query<{ id: string }>(
      `insert into outbox (id, empresa_id, sucursal_id, evento, data, request_id, modo, created_at)
       values (gen_random_uuid(), $1, null, 'GUIA_CREADA', '{"numeroGuia":"SVCLOST0001","estado":"CREADA"}', null, 'live', now() - interval '1 hour')
       returning id`,
      [company.id],
    );
    expect((await fx.dispatcher.reconciler.runOnce()).events).toBe(1);
    await eventually(
      async () => (await count(fx.pool, `select count(*) n from outbox where id = $1 and repartido_en is not null`, [lost.rows[0]!.id])) === 1,
      10_000,
      'the lost event fanned out',
    );
    expect(fx.receiver.requests.filter((r) => r.path === '/moved').map((r) => r.rawBody.toString('utf8'))).toEqual([expect.stringContaining('SVCLOST0001')]);

    // What SREs see: two events held (the second and third shipments), two read (the company's
    // first, and the reconciler's).
    const routed = (await fx.dispatcher.metrics.registry.getSingleMetric('svc_fanout_routes_total')!.get()).values;
    expect(Object.fromEntries(routed.map((v) => [v.labels.source, v.value]))).toEqual({ held: 2, read: 2 });
  }, 60_000);
});
