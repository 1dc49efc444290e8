import type pg from 'pg';
import { Redis } from 'ioredis';
import { bulkJobs, JOBS, type ShipmentEventJob } from '@svc/contracts';
import { insertNewDeliveries, markFannedOut } from '@svc/platform';
import { deletePrefix } from '../../../test/support/redis-prefix';
import { eventually, sleep } from '../../../test/support/eventually';
import { captureLogs } from '../../../test/support/log-capture';
import { createBatch, guia } from '../../../test/support/shipment-fixtures';
import { bearer, createCompany, type Company } from '../../../test/support/test-gateway';
import { startDispatcherFixture, type DispatcherFixture } from '../../../test/support/test-dispatcher';
import { TEST_REDIS_URL } from '../../../test/support/env';
import { deliveryIdOf } from '../src/fan-out/fan-out.worker';
import { findEvents } from '../src/outbox/outbox.repository';

async function count(pool: pg.Pool, query: string): Promise<number> {
  return Number((await pool.query<{ n: string }>(query)).rows[0]!.n);
}

/**
 * Send first, then record (issue 16): a new delivery's row is inserted once its first attempt is
 * made, as that attempt left it, by the statement that marks its event fanned out.
 */
describe('dispatcher: a first attempt is sent, then recorded with its delivery', () => {
  let fx: DispatcherFixture;
  let company: Company;
  const logs = captureLogs('dispatcher');
  const webhookIds = new Map<string, string>();

  beforeEach(async () => {
    // Slots for every send of a batch at once (50: 25 per webhook, a reserve of 5): with the test
    // default of 20, the 20 sends of `ship(10)` could reach the reserve, and a send deferred there
    // has its row written before its first attempt, which these tests do not look at.
    fx = await startDispatcherFixture('first-attempt', { dispatcher: { logger: logs.logger, env: { DISPATCHER_CONCURRENCY: '50' } } });
    company = await createCompany(fx.gw, { planActivo: true, creditos: 1000 });
    for (const path of ['/a', '/b']) {
      const res = await fx.gw.http.post('/api/v1/webhooks').set('Authorization', bearer(company.live)).send({ url: fx.receiver.url(path) });
      expect(res.status).toBe(201);
      webhookIds.set(path, (res.body as { data: { id: string } }).data.id);
    }
  });
  afterEach(async () => {
    await fx?.stop();
  });

  async function ship(n: number): Promise<void> {
    const res = await createBatch(fx.gw, company.live, Array.from({ length: n }, (_, i) => guia(i)));
    expect(res.status).toBe(201);
    await fx.gw.deps.outboxRelay.drain();
  }

  it('writes each delivery once, with its first attempt, in one transaction, under a name-based id the receiver got', async () => {
    await ship(10);
    await eventually(async () => (await count(fx.pool, `select count(*) n from entregas where estado = 'exitosa'`)) === 20, 10_000, 'delivered');

    const rows = await fx.pool.query<{ id: string; evento_id: string; webhook_id: string; same_tx: boolean; intentos: number }>(
      `select e.id, e.evento_id, e.webhook_id, e.intentos, e.xmin::text = i.xmin::text as same_tx
       from entregas e join entrega_intentos i on i.entrega_id = e.id`,
    );
    expect(rows.rows).toHaveLength(20);
    for (const r of rows.rows) {
      // Inserted with its attempt and never updated: no dead row, no second set of index entries.
      expect(r.same_tx).toBe(true);
      expect(r.intentos).toBe(1);
      expect(r.id).toBe(deliveryIdOf(r.evento_id, r.webhook_id));
    }
    const received = fx.receiver.requests.map((q) => (JSON.parse(q.rawBody.toString('utf8')) as { webhookId: string }).webhookId);
    expect(new Set(received)).toEqual(new Set(rows.rows.map((r) => r.id)));
    expect(await count(fx.pool, 'select count(*) n from outbox where repartido_en is null')).toBe(0);
  }, 30_000);

  it('dates each delivery by its first attempt, not by the statement that recorded a batch of them, so the log lists the newest first', async () => {
    await ship(10);
    await eventually(async () => (await count(fx.pool, `select count(*) n from entregas where estado = 'exitosa'`)) === 20, 10_000, 'delivered');
    const rows = await fx.pool.query<{ same: boolean; fecha_is_first: boolean }>(
      `select e.created_at = e.ultimo_intento_en as same, i.fecha = e.ultimo_intento_en as fecha_is_first
       from entregas e join entrega_intentos i on i.entrega_id = e.id`,
    );
    expect(rows.rows).toHaveLength(20);
    for (const r of rows.rows) expect(r).toEqual({ same: true, fecha_is_first: true });
  }, 30_000);

  it('a second run of an event (its completion lost) finds what the first recorded and sends nothing again', async () => {
    await ship(5);
    await eventually(async () => (await count(fx.pool, `select count(*) n from entregas where estado = 'exitosa'`)) === 10, 10_000, 'delivered');
    expect(fx.receiver.requests).toHaveLength(10);

    // As if each event's job had run to its record and then lost its completion: queued again.
    const redis = new Redis(TEST_REDIS_URL);
    try {
      await deletePrefix(redis, fx.prefix);
    } finally {
      redis.disconnect();
    }
    const events = fx.queue<ShipmentEventJob>(JOBS.shipmentEvent.queue);
    const ids = (await fx.pool.query<{ id: string }>('select id from outbox')).rows.map((r) => r.id);
    const jobs = [...(await findEvents(fx.gw.deps.db, ids)).values()];
    expect(jobs).toHaveLength(5);
    await events.addBulk(bulkJobs(JOBS.shipmentEvent, jobs));
    await eventually(async () => (await events.getCompletedCount()) === 5, 10_000, 'jobs ran again');
    await sleep(200);
    expect(fx.receiver.requests).toHaveLength(10);
    expect(await count(fx.pool, 'select count(*) n from entrega_intentos')).toBe(10);
  }, 30_000);

  it('a webhook removed while its first attempt is in flight: the others are recorded and the event fanned out', async () => {
    fx.receiver.respond('/a', { status: 200, delayMs: 1500 });
    await ship(3);
    await fx.receiver.waitFor(3, 5000); // /b's three; /a's are held
    // Removed outright (as a company's removal would): its deliveries have nowhere to be recorded.
    await fx.pool.query('delete from webhooks where id = $1', [webhookIds.get('/a')]);
    await eventually(async () => (await count(fx.pool, 'select count(*) n from outbox where repartido_en is null')) === 0, 10_000, 'fanned out');
    expect(await count(fx.pool, `select count(*) n from entregas where estado = 'exitosa'`)).toBe(3);
    expect(await count(fx.pool, 'select count(*) n from entregas')).toBe(3);
    expect(fx.receiver.requestsTo('/a')).toHaveLength(3);
    expect(logs.text()).not.toMatch(/attempt not recorded yet/);
  }, 30_000);

  it('inserts nothing twice: a duplicate run of the record leaves the first one and logs no attempt again', async () => {
    await ship(1);
    await eventually(async () => (await count(fx.pool, `select count(*) n from entregas where estado = 'exitosa'`)) === 2, 10_000, 'delivered');
    const [row] = (await fx.pool.query<{ id: string; evento_id: string; webhook_id: string }>('select id, evento_id, webhook_id from entregas limit 1')).rows;
    const again = await insertNewDeliveries(
      fx.gw.deps.db,
      [
        {
          id: row!.id,
          webhookId: row!.webhook_id,
          eventId: row!.evento_id,
          event: 'GUIA_CREADA',
          numeroGuia: 'X',
          attempt: { deliveryId: row!.id, attempt: 1, statusCode: 500, at: new Date(), state: 'pendiente', nextAt: new Date(), durationMs: 1, error: 'HTTP_STATUS', message: 'x', response: null },
          nextAt: new Date(),
        },
      ],
      // As a second run of the event's job: its event marked again, which gives its deliveries' key.
      markFannedOut([{ eventId: row!.evento_id }]),
    );
    expect(again.size).toBe(0);
    expect(await count(fx.pool, `select count(*) n from entregas where estado = 'exitosa'`)).toBe(2);
    expect(await count(fx.pool, 'select count(*) n from entrega_intentos')).toBe(2);
  }, 30_000);
});

describe('delivery ids', () => {
  it('stay what every earlier version computed, so a run after an upgrade sends again under the same id', () => {
    // Computed with the namespace given as a string, as before it was given as bytes.
    expect(deliveryIdOf('00000000-0000-4000-8000-000000000001', '00000000-0000-4000-8000-000000000002')).toBe('e1716aa3-a2ff-59be-95c3-c29518259a0a');
  });
});
