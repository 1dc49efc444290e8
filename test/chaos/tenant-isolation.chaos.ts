import { sleep } from '../support/eventually';
import { guia } from '../support/shipment-fixtures';
import { bearer, createCompany, type Company } from '../support/test-gateway';
import { startDispatcherFixture, type DispatcherFixture } from '../support/test-dispatcher';
import { owedDeliveries, stuckWork } from './committed-work';

/**
 * One tenant's dead endpoints must not stall another (issue 11). Company A has 10 webhooks that
 * never answer (each attempt runs into the 5 s deadline) and 300 deliveries queued; meanwhile
 * company B creates 20 shipments, one every 250 ms, delivered to a healthy endpoint. One dispatcher
 * at the default DISPATCHER_CONCURRENCY (50) and DISPATCHER_WEBHOOK_CONCURRENCY (25).
 *
 * Checks: B's request-to-receipt p95 (an upper bound of commit-to-receipt) under 1 s; every one of
 * A's deliveries still gets exactly its 3 attempts, each recorded as a TIMEOUT of at most 5.1 s
 * (the fault's effect: none of A's endpoints ever answered); every event committed owes a delivery
 * to each of its company's webhooks, recorded, and B's received; nothing is left owed.
 */

const funded = { planActivo: true, creditos: 10_000, sucursalesHabilitadas: true };
const percentile = (sorted: number[], p: number): number => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;

describe('chaos: a tenant with dead endpoints beside a healthy one', () => {
  let fx: DispatcherFixture;
  beforeAll(async () => {
    fx = await startDispatcherFixture('tenant-isolation', { dispatcher: { env: { DISPATCHER_CONCURRENCY: '50' } } });
  });
  afterAll(() => fx?.stop());

  const hook = async (c: Company, url: string): Promise<string> => {
    const res = await fx.gw.http.post('/api/v1/webhooks').set('Authorization', bearer(c.live)).send({ url, eventos: [] });
    if (res.status !== 201) throw new Error(`${res.status} ${JSON.stringify(res.body)}`);
    return res.body.data.id as string;
  };
  const ship = async (c: Company): Promise<void> => {
    const res = await fx.gw.http.post('/api/v1/guias').set('Authorization', bearer(c.live)).send(guia());
    if (res.status !== 201) throw new Error(`${res.status} ${JSON.stringify(res.body)}`);
  };
  const count = async (text: string, params: unknown[]): Promise<number> => (await fx.pool.query<{ n: number }>(text, params)).rows[0]!.n;

  it('B is served within a second while A’s 300 dead deliveries wait their turn; A still gets every attempt', async () => {
    expect(fx.dispatcher.config).toMatchObject({ concurrency: 50, webhookConcurrency: 25 });
    const a = await createCompany(fx.gw, funded);
    const b = await createCompany(fx.gw, funded);
    for (let i = 0; i < 10; i++) {
      fx.receiver.respond(`/dead-${i}`, { hang: true });
      await hook(a, fx.receiver.url(`/dead-${i}`));
    }
    await hook(b, fx.receiver.url('/healthy', 'other.test'));

    const started = Date.now();
    for (let i = 0; i < 30; i++) await ship(a);
    const aDeliveries = `select count(*)::int as n from entregas e join webhooks w on w.id = e.webhook_id where w.empresa_id = $1`;
    for (let t = Date.now(); (await count(aDeliveries, [a.id])) < 300; await sleep(50)) {
      if (Date.now() - t > 30_000) throw new Error(`A’s deliveries were not fanned out: ${await count(aDeliveries, [a.id])} of 300`);
    }

    const latencies: number[] = [];
    const waits: Array<Promise<void>> = [];
    for (let i = 0; i < 20; i++) {
      const t0 = Date.now();
      const before = fx.receiver.requestsTo('/healthy').length;
      await ship(b);
      waits.push(
        fx.receiver.waitFor(before + 1, 30_000, '/healthy').then((got) => {
          latencies.push(Math.min(...got.slice(before).map((r) => r.receivedAt)) - t0);
        }),
      );
      await sleep(250);
    }
    await Promise.all(waits);
    const sorted = [...latencies].sort((x, y) => x - y);
    const bReport = { p50: percentile(sorted, 50), p95: percentile(sorted, 95), max: sorted[sorted.length - 1] };

    const ended = `select count(*)::int as n from entregas e join webhooks w on w.id = e.webhook_id where w.empresa_id = $1 and e.estado = 'fallida'`;
    const answeredA = `select count(*)::int as n from entregas e join webhooks w on w.id = e.webhook_id where w.empresa_id = $1 and e.estado = 'exitosa'`;
    for (;;) {
      // The fault is that A's endpoints never answer: one that did would make this test prove nothing.
      const answered = await count(answeredA, [a.id]);
      if (answered > 0) throw new Error(`${answered} of A's deliveries were answered: its endpoints are not dead`);
      if ((await count(ended, [a.id])) === 300) break;
      if (Date.now() - started > 420_000) throw new Error(`A’s deliveries did not end: ${await count(ended, [a.id])} of 300`);
      await sleep(1000);
    }
    const aSettle = Date.now() - started;
    const attempts = await fx.pool.query<{ n: number; timeouts: number; longest: number }>(
      `select count(*)::int as n, count(*) filter (where i.error = 'TIMEOUT')::int as timeouts, max(i.duracion_ms)::int as longest
       from entrega_intentos i join entregas e on e.id = i.entrega_id join webhooks w on w.id = e.webhook_id where w.empresa_id = $1`,
      [a.id],
    );
    const perDelivery = await count(
      `select count(*)::int as n from entregas e join webhooks w on w.id = e.webhook_id where w.empresa_id = $1 and e.intentos <> 3`,
      [a.id],
    );
    const row = attempts.rows[0]!;
    // The most of A's attempts in flight at once, from the record: at each attempt's start, how many had started and not ended.
    const overlap = await fx.pool.query<{ n: number }>(
      `with a as (
         select i.fecha as s, i.fecha + make_interval(secs => i.duracion_ms / 1000.0) as e
         from entrega_intentos i join entregas d on d.id = i.entrega_id join webhooks w on w.id = d.webhook_id where w.empresa_id = $1
       )
       select max((select count(*) from a b where b.s <= x.s and b.e > x.s))::int as n from a x`,
      [a.id],
    );
    const maxActive = overlap.rows[0]!.n;
    console.log(
      `tenant-isolation: B request→receipt p50 ${bReport.p50} ms, p95 ${bReport.p95} ms, max ${bReport.max} ms; ` +
        `A: 300 deliveries, ${row.n} attempts (${row.timeouts} timeouts, longest ${row.longest} ms), ended after ${(aSettle / 1000).toFixed(0)} s, ` +
        `at most ${maxActive} of A's requests held at once`,
    );

    expect(bReport.p95).toBeLessThan(1000);
    expect(perDelivery).toBe(0);
    expect(row).toEqual({ n: 900, timeouts: 900, longest: expect.any(Number) });
    // The 5 s hard deadline, as recorded (duracion_ms): a loaded CI machine was seen to record
    // 5,113 ms (its event loop late to fire the deadline's timer); without the deadline an attempt
    // held by a dead endpoint lasts as long as the endpoint holds it.
    expect(row.longest).toBeLessThanOrEqual(5300);
    // Degraded webhooks together hold at most half the pool (25), plus the first wave before
    // anyone knew (at most 45: the pool minus its reserve).
    expect(maxActive).toBeLessThanOrEqual(45);

    // What the record owes, whatever the API answered: every committed event's delivery to each of
    // its company's webhooks recorded (A's ended fallida above), B's received; nothing left owed.
    const owed = await owedDeliveries(fx.pool);
    expect(owed.filter((o) => o.deliveryId === null)).toEqual([]);
    expect(owed).toHaveLength(300 + 20);
    const receivedByB = new Set(
      fx.receiver.requestsTo('/healthy').map((r) => {
        const body = JSON.parse(r.rawBody.toString('utf8')) as { event: string; data: { numeroGuia: string } };
        return `${body.event} ${body.data.numeroGuia}`;
      }),
    );
    expect(owed.filter((o) => o.path === '/healthy' && !receivedByB.has(`${o.evento} ${o.numeroGuia}`))).toEqual([]);
    expect(await stuckWork(fx.pool)).toEqual({ unfanned: 0, pending: 0 });
  }, 480_000);
});
