import { guia } from '../support/shipment-fixtures';
import { bearer, createCompany, type Company } from '../support/test-gateway';
import { startDispatcherFixture, type DispatcherFixture } from '../support/test-dispatcher';

/**
 * One company's slow endpoints must not take another's share of the send slots (issue 28). Company
 * A has 20 webhooks that answer 2xx after 4.9 s (just inside the 5 s deadline: never a failure): 10
 * live and 10 test, the contract's most per mode, both modes going through the same dispatcher;
 * 40 shipments of each mode queue 800 deliveries; meanwhile company B, with 4 webhooks that answer in 300 ms, creates 40
 * shipments, one every 250 ms (so each of its webhooks sometimes has two sends in flight). One
 * dispatcher at the default DISPATCHER_CONCURRENCY (50). Before the change each of A's webhooks had
 * its own 25 slots, so A held 45 of 50 and B's second send to a webhook waited for A's to end.
 *
 * Checks: B's commit→receipt p95 (outbox row's creation to the receiver's first request for it)
 * under 1 s; the fault took effect: A's receivers held requests while B sent, and A's attempts
 * were recorded as 2xx lasting at least 4.9 s.
 */

const funded = { planActivo: true, creditos: 10_000, sucursalesHabilitadas: true };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const percentile = (sorted: number[], p: number): number => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
const SLOW_MS = 4900;
const A_WEBHOOKS = 20;
/** Of each mode: each reaches that mode's 10 webhooks. */
const A_SHIPMENTS = 40;
const B_WEBHOOKS = 4;
const B_SHIPMENTS = 40;

describe('chaos: a tenant with 20 slow (2xx after 4.9 s) endpoints beside another', () => {
  let fx: DispatcherFixture;
  beforeAll(async () => {
    fx = await startDispatcherFixture('slow-tenant', { dispatcher: { env: { DISPATCHER_CONCURRENCY: '50' } } });
  });
  afterAll(() => fx?.stop());

  const hook = async (c: Company, url: string, token = c.live): Promise<string> => {
    const res = await fx.gw.http.post('/api/v1/webhooks').set('Authorization', bearer(token)).send({ url, eventos: [] });
    if (res.status !== 201) throw new Error(`${res.status} ${JSON.stringify(res.body)}`);
    return res.body.data.id as string;
  };
  const ship = async (c: Company, token = c.live): Promise<void> => {
    const res = await fx.gw.http.post('/api/v1/guias').set('Authorization', bearer(token)).send(guia());
    if (res.status !== 201) throw new Error(`${res.status} ${JSON.stringify(res.body)}`);
  };
  const count = async (text: string, params: unknown[]): Promise<number> => (await fx.pool.query<{ n: number }>(text, params)).rows[0]!.n;
  const aPaths = Array.from({ length: A_WEBHOOKS }, (_, i) => `/slow-${i}`);
  const bPaths = Array.from({ length: B_WEBHOOKS }, (_, i) => `/b-${i}`);
  /** A's requests the receivers hold now: arrived within the last 4.9 s (each is answered 4.9 s after it arrived). */
  const aHeldNow = (): number => {
    const since = Date.now() - SLOW_MS;
    return aPaths.reduce((n, p) => n + fx.receiver.requestsTo(p).filter((r) => r.receivedAt > since).length, 0);
  };

  it('B’s p95 commit→receipt stays under a second while A’s slow webhooks hold their share', async () => {
    expect(fx.dispatcher.config).toMatchObject({ concurrency: 50 });
    const a = await createCompany(fx.gw, funded);
    const b = await createCompany(fx.gw, funded);
    for (const [i, p] of aPaths.entries()) {
      fx.receiver.respond(p, { status: 200, delayMs: SLOW_MS });
      await hook(a, fx.receiver.url(p), i % 2 === 0 ? a.live : a.test);
    }
    for (const p of bPaths) {
      fx.receiver.respond(p, { status: 200, delayMs: 300 });
      await hook(b, fx.receiver.url(p, 'other.test'));
    }

    for (let i = 0; i < A_SHIPMENTS; i++) for (const token of [a.live, a.test]) await ship(a, token);
    const aDeliveries = `select count(*)::int as n from entregas e join webhooks w on w.id = e.webhook_id where w.empresa_id = $1`;
    for (let t = Date.now(); (await count(aDeliveries, [a.id])) < 2 * A_SHIPMENTS * (A_WEBHOOKS / 2); await sleep(50)) {
      if (Date.now() - t > 30_000) throw new Error(`A’s deliveries were not fanned out: ${await count(aDeliveries, [a.id])}`);
    }

    // B's phase, with A's requests held at the receivers sampled as it goes.
    const heldSamples: number[] = [];
    for (let i = 0; i < B_SHIPMENTS; i++) {
      await ship(b);
      heldSamples.push(aHeldNow());
      await sleep(250);
    }
    const bEvents = await fx.pool.query<{ id: string; at: Date }>(`select id, created_at as at from outbox where empresa_id = $1`, [b.id]);
    expect(bEvents.rows).toHaveLength(B_SHIPMENTS);
    const committed = new Map(bEvents.rows.map((r) => [r.id, r.at.getTime()]));
    // Every B delivery's first request, by event and webhook.
    const firstSeen = new Map<string, number>();
    for (let t = Date.now(); firstSeen.size < B_SHIPMENTS * B_WEBHOOKS; await sleep(200)) {
      if (Date.now() - t > 60_000) throw new Error(`B’s deliveries did not all arrive: ${firstSeen.size} of ${B_SHIPMENTS * B_WEBHOOKS}`);
      for (const p of bPaths) {
        for (const r of fx.receiver.requestsTo(p)) {
          const key = `${p} ${String(r.headers['webhook-id'])}`;
          if (!firstSeen.has(key) || firstSeen.get(key)! > r.receivedAt) firstSeen.set(key, r.receivedAt);
        }
      }
    }
    const latencies = [...firstSeen].map(([key, at]) => at - committed.get(key.split(' ')[1]!)!);
    expect(latencies.every((l) => Number.isFinite(l))).toBe(true);
    const sorted = [...latencies].sort((x, y) => x - y);
    const bReport = { p50: percentile(sorted, 50), p95: percentile(sorted, 95), max: sorted[sorted.length - 1]! };

    // The fault took effect: A's slow answers were recorded as such (2xx, at least 4.9 s).
    const aAttempts = await fx.pool.query<{ n: number; ok: number; shortest: number | null }>(
      `select count(*)::int as n, count(*) filter (where i.status_code between 200 and 299)::int as ok, min(i.duracion_ms)::int as shortest
       from entrega_intentos i join entregas e on e.id = i.entrega_id join webhooks w on w.id = e.webhook_id where w.empresa_id = $1`,
      [a.id],
    );
    const aRow = aAttempts.rows[0]!;
    const heldMedian = [...heldSamples].sort((x, y) => x - y)[heldSamples.length >> 1]!;
    const aReceived = aPaths.reduce((n, p) => n + fx.receiver.requestsTo(p).length, 0);
    console.log(
      `slow-tenant: B (${B_SHIPMENTS} events × ${B_WEBHOOKS} webhooks) commit→receipt p50 ${bReport.p50} ms, p95 ${bReport.p95} ms, max ${bReport.max} ms; ` +
        `A's requests held at the receivers while B sent: median ${heldMedian}, max ${Math.max(...heldSamples)}; ` +
        `A: ${aReceived} requests received, ${aRow.n} attempts recorded (${aRow.ok} 2xx, shortest ${aRow.shortest} ms)`,
    );

    // The fault: A's receivers held requests through B's phase (between two of A's waves there
    // may be a moment with none), and answered 2xx slowly (a loaded machine may record one past
    // the 5 s deadline as a TIMEOUT).
    expect(heldMedian).toBeGreaterThanOrEqual(10);
    expect(Math.max(...heldSamples)).toBeGreaterThanOrEqual(A_WEBHOOKS);
    expect(aRow.ok).toBeGreaterThanOrEqual(aRow.n / 2);
    expect(aRow.shortest).toBeGreaterThanOrEqual(SLOW_MS);
    expect(bReport.p95).toBeLessThan(1000);
  }, 240_000);
});
