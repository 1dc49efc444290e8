import { createBatch, guia } from '../support/shipment-fixtures';
import { bearer, createCompany, type Company } from '../support/test-gateway';
import { startDispatcherFixture, type DispatcherFixture } from '../support/test-dispatcher';
import { serviceProcess, type ServiceProcess } from '../support/service-process';
import type { ReceivedRequest } from '../support/https-receiver';
import { parseExposition, sampleSum, type Family } from '../support/prometheus-text';
import { sleep } from '../support/eventually';

/**
 * Retries on time while the dispatcher is saturated by other tenants' work (issue 30): attempt 2
 * comes 1 s and attempt 3 2 s after the previous attempt ended (docs/integrators.md, Receiving
 * webhooks, "Attempts"), each within 250 ms at p99. The measured tenant's 4 webhooks answer 500 at
 * once, so each is degraded after its second failure. Beside it, at the default 50 slots, three other tenants
 * keep the pool full: 8 endpoints that never answer (5 s timeouts: they fill the degraded
 * webhooks' half of the pool, and their backlog is deferred), 6 that fail at once (retries of their
 * own), and 6 healthy ones that answer after 1 s with more work than the healthy half holds
 * (deferred too: the deliveries queue the retries share holds everyone's deferred work). The
 * measured shipments start once those endpoints are known degraded: before that, a new dead
 * endpoint's first attempts hold their slots the full 5 s, and nothing can know yet that they
 * will. The gaps are measured at the receiver, between the arrivals of one delivery's attempts, so
 * each includes the previous answer (a few ms). The dispatcher runs at the default settings in a
 * process of its own, as in production: the gateway, the receiver and this load do not share its
 * event loop. A chaos scenario rather than a unit test because it measures time: the suite runs one
 * file at a time, so no other test shares the machine's two cores with it.
 */
const TOLERANCE_MS = 250;
const PROBE_HOOKS = 4;
const PROBES = 16;
const PROBE_EVERY_MS = 700;
/** The nearest-rank percentile of `values`. */
const percentile = (values: number[], p: number): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
};
const funded = { planActivo: true, creditos: 1_000_000, limiteDiario: 1_000_000 };

describe('chaos: retries on time while other tenants saturate the dispatcher', () => {
  let fx: DispatcherFixture;
  let dispatcher: ServiceProcess | undefined;
  let metricsPort = 0;
  beforeAll(async () => {
    fx = await startDispatcherFixture('retry-timing', { dispatchers: 0 });
    // The defaults: 50 slots, 25 per webhook (6 once degraded), degraded webhooks together 25.
    dispatcher = serviceProcess({
      name: 'dispatcher',
      entry: 'services/dispatcher/src/main.ts',
      readyLine: '"dispatcher started"',
      env: fx.dispatcherEnv({ DISPATCHER_CONCURRENCY: '50', DB_POOL_SIZE: '20' }),
    });
    await dispatcher.start();
    metricsPort = Number(dispatcher.readyRecord?.metricsPort);
  });
  afterAll(async () => {
    await dispatcher?.stop();
    await fx?.stop();
  });

  const hook = async (c: Company, path: string): Promise<void> => {
    const res = await fx.gw.http.post('/api/v1/webhooks').set('Authorization', bearer(c.live)).send({ url: fx.receiver.url(path), eventos: [] });
    if (res.status !== 201) throw new Error(`${res.status} ${JSON.stringify(res.body)}`);
  };
  const ship = async (c: Company): Promise<void> => {
    const res = await createBatch(fx.gw, c.live, [guia()]);
    if (res.status !== 201) throw new Error(`${res.status} ${JSON.stringify(res.body)}`);
  };
  const metrics = async (): Promise<Map<string, Family>> =>
    parseExposition(await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text());

  it('attempt 2 comes 1 s and attempt 3 2 s after the previous one, within 250 ms at p99, while other tenants fill the pool', async () => {
    // The healthy load comes from three companies: the slots are shared between companies first,
    // so one company alone holds at most half the pool and could not fill it.
    const [dead, failing, probe, ...healthy] = await Promise.all([1, 2, 3, 4, 5, 6].map(() => createCompany(fx.gw, funded)));
    for (let i = 0; i < 8; i++) {
      fx.receiver.respond(`/dead-${i}`, { hang: true });
      await hook(dead!, `/dead-${i}`);
    }
    for (let i = 0; i < 6; i++) {
      fx.receiver.respond(`/failing-${i}`, { status: 503, body: 'unavailable' });
      await hook(failing!, `/failing-${i}`);
      fx.receiver.respond(`/healthy-${i}`, { status: 200, delayMs: 1000 });
      await hook(healthy[i % healthy.length]!, `/healthy-${i}`);
    }
    for (let i = 0; i < PROBE_HOOKS; i++) {
      fx.receiver.respond(`/probe-${i}`, { status: 500, body: 'internal error' });
      await hook(probe!, `/probe-${i}`);
    }

    // The others' load runs until the measured deliveries are done. Each tick is awaited, so a slow
    // gateway slows the load rather than piling requests up.
    let loading = true;
    const every = async (everyMs: number, tick: () => Promise<void>): Promise<void> => {
      for (let next = Date.now(); loading; next += everyMs) {
        await sleep(Math.max(0, next - Date.now()));
        await tick();
      }
    };
    const held: number[] = [];
    // The dispatcher's event-loop delay (prom-client's, reset at each scrape): when a run fails,
    // this says whether the machine starved the process rather than the queue holding a retry.
    let loopDelayMs = 0;
    let measuring = false;
    const load = Promise.all([
      every(1000, () => ship(dead!)), //   8 deliveries/s of 3 attempts of 5 s
      every(500, () => ship(failing!)), // 12 deliveries/s of 3 quick failures
      ...healthy.map((c) => every(200, () => ship(c))), // 30 deliveries/s of 1 s, over three companies
      every(250, async () => {
        const m = await metrics();
        if (!measuring) return;
        held.push(sampleSum(m, 'svc_delivery_slots'));
        loopDelayMs = Math.max(loopDelayMs, Math.round(1000 * sampleSum(m, 'svc_nodejs_eventloop_lag_p99_seconds')));
      }),
    ]);

    try {
      for (let t = Date.now(); sampleSum(await metrics(), 'svc_webhooks_degraded') < 14; await sleep(100)) {
        if (Date.now() - t > 20_000) throw new Error('the dead and failing endpoints were not degraded within 20 s');
      }
      measuring = true;
      for (let i = 0; i < PROBES; i++) {
        await ship(probe!);
        await sleep(PROBE_EVERY_MS);
      }
      // The last ones' third attempts come 3 s after their first.
      const probed = (): number => fx.receiver.requests.filter((r) => r.path.startsWith('/probe-')).length;
      for (let t = Date.now(); probed() < 3 * PROBE_HOOKS * PROBES && Date.now() - t < 15_000; await sleep(100));
    } finally {
      loading = false;
      await load;
    }

    const byDelivery = new Map<string, ReceivedRequest[]>();
    for (const r of fx.receiver.requests.filter((q) => q.path.startsWith('/probe-'))) {
      const id = (JSON.parse(r.rawBody.toString('utf8')) as { webhookId: string }).webhookId;
      byDelivery.set(id, [...(byDelivery.get(id) ?? []), r]);
    }
    const deliveries = [...byDelivery.values()];
    expect(deliveries).toHaveLength(PROBE_HOOKS * PROBES);
    const gaps = { second: [] as number[], third: [] as number[] };
    for (const attempts of deliveries) {
      expect(attempts).toHaveLength(3);
      gaps.second.push(attempts[1]!.receivedAt - attempts[0]!.receivedAt);
      gaps.third.push(attempts[2]!.receivedAt - attempts[1]!.receivedAt);
    }
    const poolFull = held.filter((n) => n >= 45).length / held.length;
    // How far each gap is from its due spacing, both kinds together: the target is on their p99.
    const off = [...gaps.second.map((g) => Math.abs(g - 1000)), ...gaps.third.map((g) => Math.abs(g - 2000))];
    const summary = (a: number[]) => ({ p50: percentile(a, 50), p99: percentile(a, 99), max: Math.max(...a) });
    console.log(
      `retry gaps under load (ms): ${JSON.stringify({ second: summary(gaps.second), third: summary(gaps.third), offP99: percentile(off, 99), gaps: off.length, poolFull: Number(poolFull.toFixed(2)), loopDelayMs })}`,
    );

    // The load was real: the pool was full (the reserve reached) most of the time, and the dead
    // endpoints' deliveries were held back for the healthy half.
    expect(poolFull).toBeGreaterThan(0.5);
    expect(sampleSum(await metrics(), 'svc_delivery_deferrals_total', { reason: 'degraded_limit' })).toBeGreaterThan(0);

    expect(percentile(off, 99)).toBeLessThanOrEqual(TOLERANCE_MS);
    // And no retry is seconds late, as one deferred behind dead endpoints was.
    expect(Math.max(...off)).toBeLessThan(1000);
  }, 60_000);
});
