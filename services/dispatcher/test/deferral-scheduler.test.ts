import { JOBS } from '@svc/contracts';
import { guia } from '../../../test/support/shipment-fixtures';
import { bearer, createCompany } from '../../../test/support/test-gateway';
import { startDispatcherFixture, type DispatcherFixture } from '../../../test/support/test-dispatcher';
import { sleep } from '../../../test/support/eventually';

/**
 * Issue 28: deferred attempts wait in Postgres, not in Redis. One webhook with one slot gets far
 * more deliveries than the delivery queue may hold (DISPATCHER_QUEUED_BOUND); the queue's waiting
 * and delayed jobs never pass the bound while Postgres holds the rest, and every delivery still
 * arrives exactly once, under its own id.
 */

const BOUND = 5;
const DELIVERIES = 40;

describe('dispatcher: deferred work waits in Postgres', () => {
  let fx: DispatcherFixture;
  beforeAll(async () => {
    fx = await startDispatcherFixture('deferral-scheduler', {
      dispatcher: { env: { DISPATCHER_CONCURRENCY: '4', DISPATCHER_WEBHOOK_CONCURRENCY: '1', DISPATCHER_QUEUED_BOUND: String(BOUND) } },
    });
  });
  afterAll(() => fx?.stop());

  it('keeps the delivery queue under its bound while the rest wait as pending rows, and delivers each exactly once', async () => {
    const company = await createCompany(fx.gw, { planActivo: true, creditos: 10_000, sucursalesHabilitadas: true });
    const res = await fx.gw.http.post('/api/v1/webhooks').set('Authorization', bearer(company.live)).send({ url: fx.receiver.url('/one-slot'), eventos: [] });
    expect(res.status).toBe(201);
    const webhookId = res.body.data.id as string;
    fx.receiver.respond('/one-slot', { status: 200, delayMs: 50 });

    const queue = fx.queue(JOBS.delivery.queue);
    let maxQueued = 0;
    let maxPending = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const counts = await queue.getJobCounts('waiting', 'delayed', 'prioritized');
        maxQueued = Math.max(maxQueued, (counts.waiting ?? 0) + (counts.delayed ?? 0) + (counts.prioritized ?? 0));
        const { rows } = await fx.pool.query<{ n: number }>(`select count(*)::int as n from entregas where webhook_id = $1 and estado = 'pendiente'`, [webhookId]);
        maxPending = Math.max(maxPending, rows[0]!.n);
        await sleep(20);
      }
    })();

    try {
      await Promise.all(
        Array.from({ length: DELIVERIES }, async () => {
          const r = await fx.gw.http.post('/api/v1/guias').set('Authorization', bearer(company.live)).send(guia());
          if (r.status !== 201) throw new Error(`${r.status} ${JSON.stringify(r.body)}`);
        }),
      );
      const deadline = Date.now() + 60_000;
      for (;;) {
        const { rows } = await fx.pool.query<{ estado: string; n: number }>(`select estado, count(*)::int as n from entregas where webhook_id = $1 group by estado`, [webhookId]);
        const done = rows.find((r) => r.estado === 'exitosa')?.n ?? 0;
        if (done === DELIVERIES) break;
        if (Date.now() > deadline) throw new Error(`not all delivered within 60 s: ${JSON.stringify(rows)}`);
        await sleep(100);
      }
    } finally {
      sampling = false;
      await sampler;
    }

    // Redis never held more than the bound; Postgres held what was deferred beyond it.
    expect(maxQueued).toBeLessThanOrEqual(BOUND);
    expect(maxPending).toBeGreaterThan(BOUND);

    // Every delivery arrived exactly once, under its own id (the body's webhookId), and each row says one attempt.
    const ids = fx.receiver.requestsTo('/one-slot').map((r) => (JSON.parse(r.rawBody.toString('utf8')) as { webhookId: string }).webhookId);
    const { rows } = await fx.pool.query<{ id: string; intentos: number }>('select id, intentos from entregas where webhook_id = $1', [webhookId]);
    expect(rows).toHaveLength(DELIVERIES);
    expect(rows.every((r) => r.intentos === 1)).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    expect([...ids].sort()).toEqual(rows.map((r) => r.id).sort());
  }, 90_000);
});
