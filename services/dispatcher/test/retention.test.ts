import { eventually } from '../../../test/support/eventually';
import { count, createBatch, guia } from '../../../test/support/shipment-fixtures';
import { bearer, createCompany, type Company } from '../../../test/support/test-gateway';
import { startDispatcherFixture, type DispatcherFixture } from '../../../test/support/test-dispatcher';
import { createRetention } from '../src/retention/retention.task';

/** The reconciler never looks on its own: an old event left unfanned on purpose stays unfanned. */
const NO_RECONCILE = { RECONCILE_INTERVAL_MS: '3600000' };
const OLD = `now() - interval '40 days'`;

describe('retention (RETENTION_DAYS): rows past it go, owed work and customer data stay', () => {
  let fx: DispatcherFixture;
  let company: Company;

  beforeEach(async () => {
    fx = await startDispatcherFixture('retention', { dispatcher: { env: NO_RECONCILE } });
    company = await createCompany(fx.gw, { planActivo: true, creditos: 100_000 });
    const res = await fx.gw.http.post('/api/v1/webhooks').set('Authorization', bearer(company.live)).send({ url: fx.receiver.url('/a') });
    expect(res.status).toBe(201);
  });
  afterEach(async () => {
    await fx?.stop();
  });

  async function ship(from: number, n: number): Promise<void> {
    const res = await createBatch(fx.gw, company.live, Array.from({ length: n }, (_, i) => guia(from + i)));
    expect(res.status).toBe(201);
    await fx.gw.deps.outboxRelay.drain();
  }

  const ended = (): Promise<number> => count(fx.pool, `select count(*) n from entregas where estado <> 'pendiente'`);

  it('removes ended deliveries, their attempts and done events past retention; keeps pending work, resends, shipments and history', async () => {
    await ship(1, 10);
    await eventually(async () => (await ended()) === 10, 15_000, 'first deliveries recorded');
    expect(fx.dispatcher.config.retentionDays).toBe(30);

    // Everything so far is 40 days old: shipments, history, events, deliveries, attempts.
    await fx.pool.query(`update guias set created_at = ${OLD}`);
    await fx.pool.query(`update guia_historial set fecha = ${OLD}`);
    await fx.pool.query(`update outbox set created_at = ${OLD}`);
    await fx.pool.query(`update entregas set created_at = ${OLD}`);
    await fx.pool.query(`update entrega_intentos set fecha = ${OLD}`);
    const ids = (await fx.pool.query<{ id: string; evento_id: string }>(`select id, evento_id from entregas order by numero_guia`)).rows;
    // Two of them are still owed (pending, their next attempt tomorrow): they and their events stay.
    const pending = ids.slice(0, 2);
    await fx.pool.query(`update entregas set estado = 'pendiente', proximo_intento_en = now() + interval '1 day' where id = any($1::uuid[])`, [pending.map((p) => p.id)]);
    // One was resent today: the resend (new) stays, and with it the event it sends.
    const resent = ids[2]!;
    const resend = (
      await fx.pool.query<{ id: string }>(
        `insert into entregas (id, webhook_id, evento_id, evento, estado, exitoso, status_code, intentos, numero_guia, reenvio_de, es_reenvio)
         select gen_random_uuid(), webhook_id, evento_id, evento, 'exitosa', true, 200, 1, numero_guia, id, true from entregas where id = $1
         returning id`,
        [resent.id],
      )
    ).rows[0]!.id;
    // An old event relayed but never fanned out (its job lost): owed work, it stays.
    await fx.pool.query(
      `insert into outbox (id, empresa_id, evento, data, created_at, enviado_en, repartido_en)
       values (gen_random_uuid(), $1, 'GUIA_CREADA', '{"numeroGuia":"SVCUNFANNED"}', ${OLD}, ${OLD}, null)`,
      [company.id],
    );
    // An old expired idempotency key belongs to the gateway: the dispatcher leaves it.
    await fx.pool.query(`insert into idempotencia (scope, clave, request_hash, created_at) values ('t:r', 'k', 'h', ${OLD})`);
    // Recent rows (a second batch, delivered now) are within retention.
    await ship(100, 5);
    await eventually(async () => (await ended()) === 8 + 1 + 5, 15_000, 'recent deliveries recorded');

    const before = {
      attempts: await count(fx.pool, 'select count(*) n from entrega_intentos'),
      guias: await count(fx.pool, 'select count(*) n from guias'),
      historial: await count(fx.pool, 'select count(*) n from guia_historial'),
    };
    const removed = await fx.dispatcher.retention.runOnce();
    // 10 old deliveries: 2 pending stay, 8 ended go with their 8 attempts (one each).
    expect(removed).toEqual({ entregas: 8, entrega_intentos: 8, outbox: 7 });

    const left = (await fx.pool.query<{ id: string; reenvio_de: string | null; es_reenvio: boolean }>(`select id, reenvio_de, es_reenvio from entregas`)).rows;
    expect(left.length).toBe(2 + 1 + 5);
    for (const p of pending) expect(left.some((r) => r.id === p.id)).toBe(true);
    expect(left.find((r) => r.id === resend)).toEqual({ id: resend, reenvio_de: null, es_reenvio: true });
    expect(await count(fx.pool, 'select count(*) n from entrega_intentos')).toBe(before.attempts - 8);
    // Events left: the 2 of pending deliveries, the resent one, the unfanned one, the 5 recent.
    const events = await count(fx.pool, 'select count(*) n from outbox');
    expect(events).toBe(2 + 1 + 1 + 5);
    expect(await count(fx.pool, `select count(*) n from outbox where id = any($1::uuid[])`, [[...pending.map((p) => p.evento_id), resent.evento_id]])).toBe(3);
    expect(await count(fx.pool, `select count(*) n from outbox where repartido_en is null`)).toBe(1);
    // The customer's data is kept, whatever its age; the gateway's table is not the dispatcher's.
    expect(await count(fx.pool, 'select count(*) n from guias')).toBe(before.guias);
    expect(await count(fx.pool, 'select count(*) n from guia_historial')).toBe(before.historial);
    expect(await count(fx.pool, 'select count(*) n from idempotencia')).toBe(1);

    const metrics = await fx.dispatcher.metrics.registry.metrics();
    expect(metrics).toMatch(/^svc_retention_removed_total\{[^}]*table="entregas"[^}]*\} 8$/m);
    expect(metrics).toMatch(/^svc_retention_removed_total\{[^}]*table="entrega_intentos"[^}]*\} 8$/m);
    expect(metrics).toMatch(/^svc_retention_removed_total\{[^}]*table="outbox"[^}]*\} 7$/m);

    // A second pass finds nothing more.
    expect(await fx.dispatcher.retention.runOnce()).toEqual({ entregas: 0, entrega_intentos: 0, outbox: 0 });
  }, 60_000);

  it('removes in small batches while a delivery stream keeps flowing', async () => {
    const webhookId = (await fx.pool.query<{ id: string }>('select id from webhooks')).rows[0]!.id;
    // 3,000 old ended deliveries with an attempt each, and their events, written straight in SQL.
    await fx.pool.query(
      `insert into outbox (id, empresa_id, evento, data, created_at, enviado_en, repartido_en)
       select md5('ev' || g)::uuid, $1, 'GUIA_CREADA', jsonb_build_object('numeroGuia', 'SVCOLD' || g), ${OLD}, ${OLD}, ${OLD}
       from generate_series(1, 3000) g`,
      [company.id],
    );
    await fx.pool.query(
      `insert into entregas (id, webhook_id, evento_id, evento, estado, exitoso, status_code, intentos, numero_guia, created_at)
       select md5('de' || g)::uuid, $1, md5('ev' || g)::uuid, 'GUIA_CREADA', 'exitosa', true, 200, 1, 'SVCOLD' || g, ${OLD}
       from generate_series(1, 3000) g`,
      [webhookId],
    );
    await fx.pool.query(
      `insert into entrega_intentos (entrega_id, numero, fecha, status_code, duracion_ms)
       select md5('de' || g)::uuid, 1, ${OLD}, 200, 5 from generate_series(1, 3000) g`,
    );

    // The 150 oldest are still pending (owed work, due tomorrow): more than a whole batch of rows the
    // removal must leave at the head of its index, and go past.
    await fx.pool.query(
      `update entregas set estado = 'pendiente', proximo_intento_en = now() + interval '1 day', created_at = now() - interval '50 days'
       where numero_guia like 'SVCOLD%' and substring(numero_guia from 7)::int <= 150`,
    );

    const batches: number[] = [];
    const retention = createRetention({
      db: fx.gw.deps.db,
      logger: fx.gw.deps.logger,
      retentionDays: 30,
      batchSize: 100,
      pauseMs: 20,
      removed: (table, n) => {
        if (table === 'entregas') batches.push(n);
      },
    });
    const removal = retention.runOnce();
    // Meanwhile shipments keep coming and their deliveries keep being made and recorded.
    let shipped = 0;
    let removalDone = false;
    void removal.then(() => (removalDone = true));
    while (!removalDone && shipped < 200) {
      await ship(1000 + shipped, 10);
      shipped += 10;
    }
    const removed = await removal;
    expect(removed).toEqual({ entregas: 2850, entrega_intentos: 2850, outbox: 2850 });
    expect(batches.length).toBeGreaterThanOrEqual(28);
    expect(Math.max(...batches)).toBeLessThanOrEqual(100);
    expect(shipped).toBeGreaterThan(0);
    await fx.receiver.waitFor(shipped, 20_000);
    await eventually(async () => (await count(fx.pool, `select count(*) n from entregas where estado = 'exitosa'`)) === shipped, 15_000, 'stream recorded');
    expect(await count(fx.pool, 'select count(*) n from entregas')).toBe(shipped + 150);
    expect(await count(fx.pool, `select count(*) n from entregas where estado = 'pendiente' and numero_guia like 'SVCOLD%'`)).toBe(150);
    expect(await count(fx.pool, `select count(*) n from entrega_intentos`)).toBe(shipped + 150);
    expect(await count(fx.pool, `select count(*) n from outbox where data ->> 'numeroGuia' like 'SVCOLD%'`)).toBe(150);
  }, 60_000);
});
