import { randomUUID } from 'node:crypto';
import type { Queue } from 'bullmq';
import type pg from 'pg';
import { JOBS, type ShipmentEventJob } from '@svc/contracts';
import { createBatch, createOne, guia, moveOn } from '../../../test/support/shipment-fixtures';
import { bearer, createBranch, createCompany, startGatewayFixture, type GatewayFixture, type TestGateway } from '../../../test/support/test-gateway';
import { createWebhook } from '../../../test/support/webhook-fixtures';

interface OutboxRow {
  id: string;
  evento: string;
  empresa_id: string;
  sucursal_id: string | null;
  data: Record<string, unknown>;
  request_id: string | null;
  created_at: Date;
  enviado_en: Date | null;
  secuencia: number | null;
  modo: string;
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('the event outbox', () => {
  let fx: GatewayFixture;
  let gw: TestGateway;
  let flaky: TestGateway;
  let pool: pg.Pool;
  let queue: Queue<ShipmentEventJob>;
  let failures = 0;

  beforeAll(async () => {
    fx = await startGatewayFixture('outbox');
    ({ gw, pool } = fx);
    // A second instance whose relay's queue refuses its first add, as if Redis had blinked.
    flaky = await fx.addGateway({
      wrapRelayQueue: (inner) => ({
        addBulk: (jobs) => {
          if (failures++ === 0) return Promise.reject(new Error('Connection is closed.'));
          return inner.addBulk(jobs);
        },
      }),
    });
    queue = fx.queue<ShipmentEventJob>(JOBS.shipmentEvent.queue);
  });
  afterAll(() => fx?.stop());

  const rowsOf = async (empresaId: string) =>
    (await pool.query<OutboxRow>('select * from outbox where empresa_id = $1 order by created_at', [empresaId])).rows;

  /** `webhooksVersion`: the company's webhook count the job carries; undefined for a job the sweep rebuilt from the row, which has none. */
  async function expectQueued(row: OutboxRow, webhooksVersion?: number): Promise<void> {
    const job = await queue.getJob(row.id);
    expect(job).toBeDefined();
    expect(job!.name).toBe(JOBS.shipmentEvent.name);
    expect(job!.data).toEqual({
      eventId: row.id,
      evento: row.evento,
      empresaId: row.empresa_id,
      sucursalId: row.sucursal_id,
      data: row.data,
      requestId: row.request_id,
      committedAt: expect.any(String),
      // The event's place in its shipment's history and its mode travel with it (X-SVC-Secuencia, X-SVC-Modo).
      ...(row.secuencia === null ? {} : { sequence: row.secuencia }),
      mode: row.modo,
      ...(webhooksVersion === undefined ? {} : { webhooksVersion }),
      // The row's partition key, exactly: the dispatcher finds the row by it (decision 0009).
      partitionAt: row.created_at.toISOString(),
    });
    expect(Number.isNaN(Date.parse(job!.data.committedAt))).toBe(false);
  }

  it('relays every committed event to the queue, with job id = event id, and marks it sent', async () => {
    const c = await createCompany(gw, { planActivo: true, creditos: 100, sucursalesHabilitadas: true });
    const s = await createBranch(gw, c.id);
    const one = (await createOne(gw, c.live)).body.data.numeroGuia as string;
    const batch = await createBatch(gw, s.live, [guia(1), guia(2), guia(3)]);
    expect(batch.status).toBe(201);
    for (const evento of ['GUIA_RECOLECTADA', 'GUIA_EN_BODEGA', 'GUIA_EN_RUTA']) expect((await moveOn(gw, one, { evento })).status).toBe(200);
    expect((await moveOn(gw, one, { evento: 'GUIA_DEVOLUCION', motivo: 'Rechazado' })).status).toBe(200);
    await gw.deps.outboxRelay.drain();

    const rows = await until('every event marked sent', async () => {
      const r = await rowsOf(c.id);
      return r.every((x) => x.enviado_en !== null) ? r : undefined;
    });
    expect(rows).toHaveLength(8);
    expect(rows.filter((r) => r.evento === 'GUIA_CREADA')).toHaveLength(4);
    expect(rows.filter((r) => r.sucursal_id === s.id)).toHaveLength(3);
    // Each event's position in its shipment's history, fixed at commit: 1 for every GUIA_CREADA.
    expect(rows.filter((r) => r.evento === 'GUIA_CREADA').map((r) => r.secuencia)).toEqual([1, 1, 1, 1]);
    expect(rows.filter((r) => r.data.numeroGuia === one).map((r) => [r.evento, r.secuencia])).toEqual([
      ['GUIA_CREADA', 1],
      ['GUIA_RECOLECTADA', 2],
      ['GUIA_EN_BODEGA', 3],
      ['GUIA_EN_RUTA', 4],
      ['GUIA_DEVOLUCION', 5],
    ]);
    expect(rows.every((r) => r.modo === 'live')).toBe(true);
    // No webhook yet: the company's count is 0.
    for (const row of rows) await expectQueued(row, 0);
    // A sandbox shipment's event goes the same way, marked test.
    expect((await createOne(gw, c.test)).status).toBe(201);
    await gw.deps.outboxRelay.drain();
    const sandbox = await until('the sandbox event marked sent', async () => {
      const r = (await rowsOf(c.id)).filter((x) => x.modo === 'test');
      return r.length === 1 && r[0]!.enviado_en !== null ? r[0] : undefined;
    });
    expect(sandbox).toMatchObject({ evento: 'GUIA_CREADA', secuencia: 1, sucursal_id: null });
    await expectQueued(sandbox, 0);
  });

  it('delivers an event whose first add failed: it stays unsent, then the sweep adds it', async () => {
    const c = await createCompany(flaky, { planActivo: true, creditos: 10 });
    const created = await createOne(flaky, c.live);
    expect(created.status).toBe(201);
    await flaky.deps.outboxRelay.drain();
    expect(failures).toBe(1);
    const [row] = await rowsOf(c.id);
    expect(row).toMatchObject({ evento: 'GUIA_CREADA', enviado_en: null });
    expect(await queue.getJob(row!.id)).toBeUndefined();
    expect(flaky.logs.text()).toContain('outbox relay failed');

    // No nudge: the periodic sweep finds the committed-but-unsent row.
    const sent = await until('the sweep to mark it sent', async () => {
      const [r] = await rowsOf(c.id);
      return r?.enviado_en ? r : undefined;
    });
    await expectQueued(sent);
    expect((await queue.getJob(sent.id))!.data.data).toEqual({ numeroGuia: created.body.data.numeroGuia, estado: 'CREADA' });
  });

  it('sweeps an event committed without ever being handed to the relay (a crash after commit)', async () => {
    const c = await createCompany(gw);
    const id = randomUUID();
    await pool.query(
      `insert into outbox (id, empresa_id, sucursal_id, evento, data, request_id, created_at)
       values ($1, $2, null, 'GUIA_ANULADA', $3, 'req-orphan', now() - interval '5 seconds')`,
      [id, c.id, JSON.stringify({ numeroGuia: 'SVC0RPHAN0000', estado: 'ANULADA' })],
    );
    // Whichever sweep gets there first (a periodic one or this one), the event is added once.
    await gw.deps.outboxRelay.sweepNow();
    const [row] = await until('the orphan to be sent', async () => {
      const r = await rowsOf(c.id);
      return r[0]?.enviado_en ? r : undefined;
    });
    expect(row!.id).toBe(id);
    await expectQueued(row!);
    // A re-add of the same event (relay and sweep racing) is harmless: still one job.
    await queue.addBulk([{ name: JOBS.shipmentEvent.name, data: (await queue.getJob(id))!.data, opts: { jobId: id } }]);
    expect(await queue.getJobCountByTypes('waiting', 'delayed', 'prioritized')).toBe(
      (await pool.query("select count(*)::int n from outbox where enviado_en is not null")).rows[0].n,
    );
  });
});

describe('the webhook count an event carries', () => {
  let fx: GatewayFixture;
  beforeAll(async () => {
    fx = await startGatewayFixture('outbox-count', { receiver: true });
  });
  afterAll(() => fx?.stop());

  it('is the company count its own statement read: a change that routes or signs adds one, a description does not', async () => {
    const { gw } = fx;
    const queue = fx.queue<ShipmentEventJob>(JOBS.shipmentEvent.queue);
    const c = await createCompany(gw, { planActivo: true, creditos: 100 });
    let numeroGuia = '';
    /** The count carried by the job of the event `emit` commits (the latest of the company's). */
    const carried = async (emit: () => Promise<{ status: number }>): Promise<number | undefined> => {
      expect((await emit()).status).toBeLessThan(300);
      await gw.deps.outboxRelay.drain();
      const { rows } = await fx.pool.query<{ id: string }>('select id from outbox where empresa_id = $1 order by created_at desc, secuencia desc limit 1', [c.id]);
      return (await queue.getJob(rows[0]!.id))?.data.webhooksVersion;
    };
    const create = async () => {
      const res = await createOne(gw, c.live);
      numeroGuia = (res.body as { data: { numeroGuia: string } }).data.numeroGuia;
      return res;
    };
    const patch = (id: string, body: object) => gw.http.patch(`/api/v1/webhooks/${id}`).set('Authorization', bearer(c.live)).send(body);

    expect(await carried(create)).toBe(0);
    const hook = await createWebhook(gw, c.live, fx.receiver!.url('/a'));
    expect(await carried(create)).toBe(1);
    expect((await patch(hook.id, { descripcion: 'solo texto' })).status).toBe(200);
    expect(await carried(create)).toBe(1);
    expect((await patch(hook.id, { url: fx.receiver!.url('/b') })).status).toBe(200);
    expect(await carried(create)).toBe(2);
    const rotated = await gw.http.post(`/api/v1/webhooks/${hook.id}/secreto`).set('Authorization', bearer(c.live)).send({});
    expect(rotated.status).toBe(200);
    // A transition's event (written by its own statement, not the creation's) carries it too.
    expect(await carried(() => moveOn(gw, numeroGuia, { evento: 'GUIA_RECOLECTADA' }))).toBe(3);
    expect((await gw.http.delete(`/api/v1/webhooks/${hook.id}`).set('Authorization', bearer(c.live))).status).toBe(200);
    expect(await carried(create)).toBe(4);
  });
});
