import type pg from 'pg';
import { deletePrefix } from '../../../test/support/redis-prefix';
import { eventually, sleep } from '../../../test/support/eventually';
import { createBatch, guia } from '../../../test/support/shipment-fixtures';
import { bearer, createCompany, type Company } from '../../../test/support/test-gateway';
import { startDispatcherFixture, type DispatcherFixture } from '../../../test/support/test-dispatcher';
import { Redis } from 'ioredis';
import { TEST_REDIS_URL } from '../../../test/support/env';

/** Reconciler settings that make a test quick: look every 200 ms for work 1 s late. */
const QUICK = { RECONCILE_INTERVAL_MS: '200', RECONCILE_GRACE_MS: '1000' };
/** One that never looks on its own: the test runs its passes. */
const MANUAL = { RECONCILE_INTERVAL_MS: '3600000', RECONCILE_GRACE_MS: '1000' };

async function count(pool: pg.Pool, query: string): Promise<number> {
  return Number((await pool.query<{ n: string }>(query)).rows[0]!.n);
}

describe('the reconciler: Postgres is the record, Redis a work list it rebuilds', () => {
  let fx: DispatcherFixture;
  let redis: Redis;
  let company: Company;

  beforeEach(async () => {
    fx = await startDispatcherFixture('reconcile', { dispatchers: 0 });
    redis = new Redis(TEST_REDIS_URL);
    company = await createCompany(fx.gw, { planActivo: true, creditos: 1000 });
    for (const path of ['/a', '/b']) {
      const res = await fx.gw.http.post('/api/v1/webhooks').set('Authorization', bearer(company.live)).send({ url: fx.receiver.url(path) });
      expect(res.status).toBe(201);
    }
  });
  afterEach(async () => {
    redis?.disconnect();
    await fx?.stop();
  });

  async function ship(n: number): Promise<void> {
    const res = await createBatch(fx.gw, company.live, Array.from({ length: n }, (_, i) => guia(i)));
    expect(res.status).toBe(201);
    await fx.gw.deps.outboxRelay.drain();
  }

  /** Every (event, webhook) received once at least, each with one webhookId; returns the receipts by pair. */
  function receiptsByPair(): Map<string, Set<string>> {
    const pairs = new Map<string, Set<string>>();
    for (const r of fx.receiver.requests) {
      const body = JSON.parse(r.rawBody.toString('utf8')) as { webhookId: string; data: { numeroGuia: string } };
      const key = `${r.path} ${body.data.numeroGuia}`;
      pairs.set(key, (pairs.get(key) ?? new Set()).add(body.webhookId));
    }
    return pairs;
  }

  it('delivers events whose jobs Redis lost before any fan-out (Redis emptied), each once per webhook', async () => {
    await ship(30);
    expect(await count(fx.pool, 'select count(*) n from outbox where repartido_en is null')).toBe(30);
    await deletePrefix(redis, fx.prefix); // as a Redis restarted without its data

    await fx.addDispatcher({ env: QUICK });
    await fx.receiver.waitFor(60, 15_000);
    await eventually(async () => (await count(fx.pool, `select count(*) n from entregas where estado = 'exitosa'`)) === 60, 10_000, 'all recorded');
    const pairs = receiptsByPair();
    expect(pairs.size).toBe(60);
    for (const ids of pairs.values()) expect(ids.size).toBe(1);
    expect(await count(fx.pool, 'select count(*) n from outbox where repartido_en is null')).toBe(0);
  }, 30_000);

  it('queues overdue deliveries again after their jobs were lost mid-retry, with the attempts already made', async () => {
    fx.receiver.respond('/a', { status: 500 });
    const d = await fx.addDispatcher({ env: MANUAL });
    await ship(10);
    // First attempts made (10 to /a failed, 10 to /b done); the second attempts of /a are delayed jobs.
    await eventually(async () => (await count(fx.pool, `select count(*) n from entregas where intentos = 1`)) === 20, 10_000, 'first attempts');
    await deletePrefix(redis, fx.prefix); // the delayed retries vanish
    fx.receiver.respond('/a', { status: 200 });
    await sleep(2500); // their due time (+1 s) and the grace (1 s) pass

    // Each lost retry is queued again exactly once. Passes repeat until all 10 are: a retry that ran
    // before the prefix was emptied and found its webhook (degraded by the 500s) without a free slot
    // had its due time moved to its turn, so under load it may come due a little later.
    let queued = 0;
    await eventually(async () => (queued += (await d.reconciler.runOnce()).deliveries) >= 10, 15_000, 'lost retries queued again');
    expect(queued).toBe(10);
    await eventually(async () => (await count(fx.pool, `select count(*) n from entregas where estado = 'exitosa'`)) === 20, 10_000, 'retries delivered');
    const retried = await fx.pool.query<{ intentos: number }>(`select intentos from entregas e join webhooks w on w.id = e.webhook_id where w.url like '%/a'`);
    expect(retried.rows.map((r) => r.intentos)).toEqual(Array(10).fill(2));
    expect(fx.receiver.requestsTo('/a')).toHaveLength(20);
  }, 30_000);

  it('ends as failed a pending delivery whose event row is gone, rather than claiming it every pass', async () => {
    fx.receiver.respond('/a', { status: 500 });
    const d = await fx.addDispatcher({ env: MANUAL });
    await ship(3);
    await eventually(async () => (await count(fx.pool, `select count(*) n from entregas where intentos = 1`)) === 6, 10_000, 'first attempts');
    // The retries' jobs are lost, and so are their events' rows: nothing is left to send.
    await deletePrefix(redis, fx.prefix);
    await fx.pool.query(`delete from outbox where id in (select evento_id from entregas where estado = 'pendiente')`);
    await sleep(2500); // their due time (+1 s) and the grace (1 s) pass

    const failures = async (): Promise<number> => {
      const text = await (await fetch(`http://127.0.0.1:${d.metricsPort}/metrics`)).text();
      return [...text.matchAll(/^svc_webhook_deliveries_total\{[^}]*outcome="failure"[^}]*\} (\d+)/gm)].reduce((n, m) => n + Number(m[1]), 0);
    };
    const failedBefore = await failures();
    expect(await d.reconciler.runOnce()).toEqual({ events: 0, deliveries: 0 });
    // Counted as failed deliveries, as any other that ends so.
    expect((await failures()) - failedBefore).toBe(3);
    const rows = await fx.pool.query<{ estado: string; intentos: number }>(`select estado, intentos from entregas e join webhooks w on w.id = e.webhook_id where w.url like '%/a'`);
    expect(rows.rows).toEqual(Array(3).fill({ estado: 'fallida', intentos: 1 }));
    // Ended: a later pass finds nothing to claim, and nothing more was sent.
    await sleep(1200);
    expect(await d.reconciler.runOnce()).toEqual({ events: 0, deliveries: 0 });
    expect(await count(fx.pool, `select count(*) n from entregas where estado = 'pendiente'`)).toBe(0);
    expect(fx.receiver.requestsTo('/a')).toHaveLength(3);
  }, 30_000);

  it('never queues a delivery that has ended, and two reconcilers racing queue each lost one once', async () => {
    const a = await fx.addDispatcher({ env: MANUAL });
    await ship(20);
    await eventually(async () => (await count(fx.pool, `select count(*) n from entregas where estado = 'exitosa'`)) === 40, 10_000, 'delivered');
    expect(await a.reconciler.runOnce()).toEqual({ events: 0, deliveries: 0 });

    // With no dispatcher running, 20 more shipments' work is queued, then lost.
    await a.stop();
    await ship(20);
    await deletePrefix(redis, fx.prefix);
    await sleep(1200);
    const [b, c] = await Promise.all([fx.addDispatcher({ env: MANUAL }), fx.addDispatcher({ env: MANUAL })]);
    const [first, second] = await Promise.all([b.reconciler.runOnce(), c.reconciler.runOnce()]);
    // Each lost event was claimed by one of them (skip locked): queued once in all.
    expect(first.events + second.events).toBe(20);
    await fx.receiver.waitFor(80, 15_000);
    await sleep(300);
    const pairs = receiptsByPair();
    expect(pairs.size).toBe(80);
    expect([...pairs.values()].every((ids) => ids.size === 1)).toBe(true);
    expect(fx.receiver.requests).toHaveLength(80);
  }, 40_000);

  it('spends no attempt on Postgres being away: the deliveries wait, then go out with one attempt each', async () => {
    const { postgres } = await fx.proxies();
    await fx.addDispatcher({ viaProxies: true, env: MANUAL });
    postgres.cut();
    try {
      await ship(10); // the gateway reaches Postgres directly
      await sleep(3000); // the fan-out fails and retries meanwhile
      expect(fx.receiver.requests).toHaveLength(0);
    } finally {
      postgres.restore();
    }
    await fx.receiver.waitFor(20, 20_000);
    await eventually(async () => (await count(fx.pool, `select count(*) n from entregas where estado = 'exitosa' and intentos = 1`)) === 20, 15_000, 'recorded');
    expect(await count(fx.pool, `select count(*) n from entregas`)).toBe(20);
  }, 40_000);
});
