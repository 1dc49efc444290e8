import type pg from 'pg';
import type { Receiver } from '../../../test/support/https-receiver';
import { createBatch, guia } from '../../../test/support/shipment-fixtures';
import { bearer, createCompany, type TestGateway } from '../../../test/support/test-gateway';
import { startDispatcherFixture, type DispatcherFixture } from '../../../test/support/test-dispatcher';
import { sleep } from '../../../test/support/eventually';

describe('a graceful stop', () => {
  let fx: DispatcherFixture;
  let receiver: Receiver;
  let gw: TestGateway;
  let pool: pg.Pool;

  beforeAll(async () => {
    fx = await startDispatcherFixture('stop', { receiver: { defaultResponse: { status: 200, delayMs: 300 } }, dispatchers: 0 });
    ({ receiver, gw, pool } = fx);
  });
  afterAll(() => fx?.stop());

  it('finishes and records the deliveries in flight, leaves the rest queued for the next dispatcher, sends nothing twice', async () => {
    const first = await fx.addDispatcher({ env: { DISPATCHER_CONCURRENCY: '5' } });
    const c = await createCompany(gw, { planActivo: true, creditos: 100 });
    const res = await gw.http.post('/api/v1/webhooks').set('Authorization', bearer(c.live)).send({ url: receiver.url('/stop') });
    expect(res.status).toBe(201);
    expect((await createBatch(gw, c.live, Array.from({ length: 40 }, (_, i) => guia(i)))).status).toBe(201);

    await receiver.waitFor(5, 10_000);
    await first.stop(); // waits for the 5 in flight (each answered after 300 ms) and their records
    const sentBeforeStop = receiver.requests.length;
    const rows = await pool.query<{ estado: string; intentos: number; n: string }>(
      'select estado, intentos, count(*) n from entregas group by estado, intentos',
    );
    const byState = Object.fromEntries(rows.rows.map((r) => [`${r.estado}/${r.intentos}`, Number(r.n)]));
    // Every request that went out is recorded as a success; nothing is left half-done.
    expect(byState['exitosa/1']).toBe(sentBeforeStop);
    // The rest is owed: deliveries created but not attempted, or events not yet taken (an event's
    // job makes its deliveries' first attempts, so only the events taken were fanned out).
    const unfanned = Number((await pool.query(`select count(*) n from outbox where repartido_en is null`)).rows[0].n);
    expect((byState['pendiente/0'] ?? 0) + unfanned).toBe(40 - sentBeforeStop);
    expect(Object.keys(byState).sort()).toEqual(['exitosa/1', 'pendiente/0'].filter((k) => k in byState).sort());
    await sleep(500);
    expect(receiver.requests.length).toBe(sentBeforeStop);

    await fx.addDispatcher({ env: { DISPATCHER_CONCURRENCY: '20' } }); // stopped by the fixture
    await receiver.waitFor(40, 15_000);
    const succeeded = async () => Number((await pool.query(`select count(*) n from entregas where estado = 'exitosa'`)).rows[0].n);
    for (let i = 0; i < 50 && (await succeeded()) < 40; i++) await sleep(100);
    expect(await succeeded()).toBe(40);
    await sleep(500);
    const ids = receiver.requests.map((r) => r.headers['x-request-id']);
    expect(new Set(ids).size).toBe(40);
    expect(ids).toHaveLength(40);
  }, 30_000);
});
