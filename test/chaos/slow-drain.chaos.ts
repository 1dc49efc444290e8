import { sleep } from '../support/eventually';
import { createBatch, guia } from '../support/shipment-fixtures';
import { bearer, createCompany } from '../support/test-gateway';
import { startDispatcherFixture, type DispatcherFixture } from '../support/test-dispatcher';

/**
 * A slow but healthy receiver alone drains its backlog at the pool's pace (issue 41). One company,
 * one webhook whose receiver answers 2xx after 4 s (healthy by the contract: within 5 s); 600
 * shipments are committed while no dispatcher runs (a backlog, as after a Postgres cut), then one
 * dispatcher starts. Before the shares were work-conserving, the webhook counted as degraded for its
 * slow answers and held a quarter of its share (6 of 50 slots) though nothing else was waiting:
 * about 1.5 deliveries/s, 400 s for the backlog.
 *
 * Checks, under DISPATCHER_CONCURRENCY=50 and under the default (adaptive, from 50): every delivery
 * ends exitosa with one attempt, at a rate (deliveries / s from the first request to the last
 * delivery recorded) of at least 0.8 × its share at the floor (25 slots) ÷ 4 s = 5/s.
 */

const funded = { planActivo: true, creditos: 10_000, limiteDiario: 10_000 };
const ANSWER_MS = 4000;
const BACKLOG = 600;
const BATCH = 50;
/** The webhook's share at a pool of 50: half of it. */
const SHARE = 25;
const TARGET_PER_S = (0.8 * SHARE) / (ANSWER_MS / 1000);

describe.each([
  ['DISPATCHER_CONCURRENCY=50', { DISPATCHER_CONCURRENCY: '50' }],
  ['the default (adaptive)', { DISPATCHER_CONCURRENCY: '' }],
])('chaos: a lone webhook answering in 4 s drains a 600-delivery backlog, %s', (label, env) => {
  let fx: DispatcherFixture;
  beforeAll(async () => {
    fx = await startDispatcherFixture('slow-drain', { dispatchers: 0 });
  });
  afterAll(() => fx?.stop());

  it(`at least ${TARGET_PER_S} deliveries/s`, async () => {
    const a = await createCompany(fx.gw, funded);
    fx.receiver.respond('/slow', { status: 200, delayMs: ANSWER_MS });
    const hook = await fx.gw.http.post('/api/v1/webhooks').set('Authorization', bearer(a.live)).send({ url: fx.receiver.url('/slow'), eventos: [] });
    expect(hook.status).toBe(201);
    for (let n = 0; n < BACKLOG / BATCH; n++) {
      const res = await createBatch(
        fx.gw,
        a.live,
        Array.from({ length: BATCH }, (_, i) => guia(n * BATCH + i)),
      );
      if (res.status !== 201) throw new Error(`${res.status} ${JSON.stringify(res.body)}`);
    }
    const done = async (): Promise<number> =>
      (await fx.pool.query<{ n: number }>(`select count(*)::int as n from entregas where estado = 'exitosa'`)).rows[0]!.n;

    const dispatcher = await fx.addDispatcher({ env });
    const started = Date.now();
    const progress: number[] = [];
    for (let tick = 0; ; tick++) {
      const n = await done();
      if (tick % 10 === 0) progress.push(n);
      if (n >= BACKLOG) break;
      if (Date.now() - started > 300_000) throw new Error(`${label}: ${n} of ${BACKLOG} delivered after 300 s (${(n / 300).toFixed(2)}/s); every 10 s: ${progress.join(' ')}`);
      await sleep(1000);
    }
    const finished = Date.now();
    const first = Math.min(...fx.receiver.requestsTo('/slow').map((r) => r.receivedAt));
    const rate = BACKLOG / ((finished - first) / 1000);
    const attempts = (await fx.pool.query<{ n: number }>('select count(*)::int as n from entrega_intentos')).rows[0]!.n;
    const limit = dispatcher.config.concurrency;
    console.log(
      `slow-drain (${label}): ${BACKLOG} deliveries to a 4 s receiver in ${((finished - first) / 1000).toFixed(1)} s: ` +
        `${rate.toFixed(2)}/s (target ${TARGET_PER_S}/s), ${attempts} attempts, ${fx.receiver.requestsTo('/slow').length} requests; ` +
        `floor ${limit}; delivered every 10 s: ${progress.join(' ')}`,
    );
    expect(attempts).toBe(BACKLOG);
    expect(rate).toBeGreaterThanOrEqual(TARGET_PER_S);
  }, 360_000);
});
