import { eventually } from '../../../test/support/eventually';
import { count, createBatch, guia } from '../../../test/support/shipment-fixtures';
import { bearer, createCompany, type Company } from '../../../test/support/test-gateway';
import { startDispatcherFixture, type DispatcherFixture } from '../../../test/support/test-dispatcher';
import { ensurePartitions } from '@svc/platform';
import { createRetention } from '../src/retention/retention.task';

/** The reconciler never looks on its own: an old event left unfanned on purpose stays unfanned. */
const NO_RECONCILE = { RECONCILE_INTERVAL_MS: '3600000' };
/** Noon of the UTC day `days` before today: a time well inside its day's partition. */
const dayAgo = (days: number) => `date_trunc('day', now(), 'UTC') - interval '${days} days' + interval '12 hours'`;
/** A day past RETENTION_DAYS (30), all of whose deliveries ended: it goes. */
const OLD = dayAgo(40);
/** A day past it too, that still holds owed work: it stays. */
const OWED = dayAgo(41);

describe('retention (RETENTION_DAYS): whole days past it are dropped; owed work and customer data stay', () => {
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
  const partitions = async (like: string): Promise<string[]> =>
    (await fx.pool.query<{ n: string }>(`select relname n from pg_class where relname like $1 and relkind = 'r' order by 1`, [like])).rows.map((r) => r.n);

  /** Moves events (and their deliveries and attempts) to the day of `at`: their partition keys change. */
  async function backdate(eventIds: string[], at: string): Promise<void> {
    await fx.pool.query(`update outbox set created_at = ${at} where id = any($1::uuid[])`, [eventIds]);
    await fx.pool.query(`update entregas set particion_en = ${at}, created_at = ${at} where evento_id = any($1::uuid[]) and not es_reenvio`, [eventIds]);
    await fx.pool.query(
      `update entrega_intentos i set particion_en = ${at}, fecha = ${at} from entregas e where e.id = i.entrega_id and e.evento_id = any($1::uuid[]) and not e.es_reenvio`,
      [eventIds],
    );
  }

  it('drops the ended days with their deliveries, attempts and events; keeps a day with owed work, resends and what they name, shipments and history', async () => {
    await ship(1, 10);
    await eventually(async () => (await ended()) === 10, 15_000, 'first deliveries recorded');
    expect(fx.dispatcher.config.retentionDays).toBe(30);

    const ids = (await fx.pool.query<{ id: string; evento_id: string }>(`select id, evento_id from entregas order by numero_guia`)).rows;
    // Everything so far happened 40 days ago: shipments, history, events, deliveries, attempts.
    await fx.pool.query(`update guias set created_at = ${OLD}`);
    await fx.pool.query(`update guia_historial set fecha = ${OLD}`);
    await backdate(ids.map((r) => r.evento_id), OLD);
    // Two of them, a day earlier, are still owed (pending, their next attempt tomorrow): their day stays.
    const pending = ids.slice(0, 2);
    await backdate(pending.map((p) => p.evento_id), OWED);
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
    // An old event of the owed day relayed but never fanned out (its job lost): owed work too.
    await fx.pool.query(
      `insert into outbox (id, empresa_id, evento, data, created_at, enviado_en, repartido_en)
       values (gen_random_uuid(), $1, 'GUIA_CREADA', '{"numeroGuia":"SVCUNFANNED"}', ${OWED}, ${OWED}, null)`,
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
    // The old days' rows went to the DEFAULT partitions (no partition was made 40 days back); the
    // pass first moves them into partitions of their days, then drops the day that ended.
    expect(await count(fx.pool, 'select count(*) n from entregas_default')).toBe(10);
    const removed = await fx.dispatcher.retention.runOnce();
    // The old day's 8 deliveries go with their 8 attempts (one each) and 7 of its 8 events.
    expect(removed).toEqual({ entregas: 8, entrega_intentos: 8, outbox: 7 });
    const oldDay = (await fx.pool.query<{ d: string }>(`select to_char(${OLD}, 'YYYYMMDD') d`)).rows[0]!.d;
    const owedDay = (await fx.pool.query<{ d: string }>(`select to_char(${OWED}, 'YYYYMMDD') d`)).rows[0]!.d;
    for (const table of ['entregas', 'entrega_intentos', 'outbox']) {
      const names = await partitions(`${table}_p%`);
      expect(names).not.toContain(`${table}_p${oldDay}`);
      expect(names).toContain(`${table}_p${owedDay}`);
    }
    expect(await count(fx.pool, 'select count(*) n from entregas_default')).toBe(0);

    const left = (await fx.pool.query<{ id: string; reenvio_de: string | null; es_reenvio: boolean }>(`select id, reenvio_de, es_reenvio from entregas`)).rows;
    expect(left.length).toBe(2 + 1 + 5);
    for (const p of pending) expect(left.some((r) => r.id === p.id)).toBe(true);
    expect(left.find((r) => r.id === resend)).toEqual({ id: resend, reenvio_de: null, es_reenvio: true });
    expect(await count(fx.pool, 'select count(*) n from entrega_intentos')).toBe(before.attempts - 8);
    // Events left: the 2 of pending deliveries, the resent one (moved to its resend's day), the
    // unfanned one, the 5 recent.
    const events = await count(fx.pool, 'select count(*) n from outbox');
    expect(events).toBe(2 + 1 + 1 + 5);
    expect(await count(fx.pool, `select count(*) n from outbox where id = any($1::uuid[])`, [[...pending.map((p) => p.evento_id), resent.evento_id]])).toBe(3);
    expect(await count(fx.pool, `select count(*) n from outbox o join entregas r on r.evento_id = o.id and r.id = $1 where o.created_at = r.particion_en`, [resend])).toBe(1);
    expect(await count(fx.pool, `select count(*) n from outbox where repartido_en is null`)).toBe(1);
    // The customer's data is kept, whatever its age; the gateway's table is not the dispatcher's.
    expect(await count(fx.pool, 'select count(*) n from guias')).toBe(before.guias);
    expect(await count(fx.pool, 'select count(*) n from guia_historial')).toBe(before.historial);
    expect(await count(fx.pool, 'select count(*) n from idempotencia')).toBe(1);

    const metrics = await fx.dispatcher.metrics.registry.metrics();
    expect(metrics).toMatch(/^svc_retention_removed_total\{[^}]*table="entregas"[^}]*\} 8$/m);
    expect(metrics).toMatch(/^svc_retention_removed_total\{[^}]*table="entrega_intentos"[^}]*\} 8$/m);
    expect(metrics).toMatch(/^svc_retention_removed_total\{[^}]*table="outbox"[^}]*\} 7$/m);

    // A second pass finds nothing more; once the owed work has ended, its day goes too.
    expect(await fx.dispatcher.retention.runOnce()).toEqual({ entregas: 0, entrega_intentos: 0, outbox: 0 });
    await fx.pool.query(`update entregas set estado = 'fallida', proximo_intento_en = null where id = any($1::uuid[])`, [pending.map((p) => p.id)]);
    await fx.pool.query(`update outbox set repartido_en = now() where repartido_en is null`);
    expect(await fx.dispatcher.retention.runOnce()).toEqual({ entregas: 2, entrega_intentos: 2, outbox: 3 });
  }, 60_000);

  it('drops a day of 3,000 deliveries while a delivery stream keeps flowing', async () => {
    const webhookId = (await fx.pool.query<{ id: string }>('select id from webhooks')).rows[0]!.id;
    // 3,000 old ended deliveries with an attempt each, and their events, written straight in SQL.
    await fx.pool.query(
      `insert into outbox (id, empresa_id, evento, data, created_at, enviado_en, repartido_en)
       select md5('ev' || g)::uuid, $1, 'GUIA_CREADA', jsonb_build_object('numeroGuia', 'SVCOLD' || g), ${OLD}, ${OLD}, ${OLD}
       from generate_series(1, 3000) g`,
      [company.id],
    );
    await fx.pool.query(
      `insert into entregas (id, webhook_id, evento_id, evento, estado, exitoso, status_code, intentos, numero_guia, created_at, particion_en)
       select md5('de' || g)::uuid, $1, md5('ev' || g)::uuid, 'GUIA_CREADA', 'exitosa', true, 200, 1, 'SVCOLD' || g, ${OLD}, ${OLD}
       from generate_series(1, 3000) g`,
      [webhookId],
    );
    await fx.pool.query(
      `insert into entrega_intentos (entrega_id, numero, fecha, status_code, duracion_ms, particion_en)
       select md5('de' || g)::uuid, 1, ${OLD}, 200, 5, ${OLD} from generate_series(1, 3000) g`,
    );
    // Their day's partitions are made first (as the upkeep would have, then), so the drop is the
    // pass's only work.
    await ensurePartitions(fx.gw.deps.db, ['outbox', 'entregas', 'entrega_intentos'], new Date(Date.now() - 40 * 86_400_000));

    const retention = createRetention({ db: fx.gw.deps.db, logger: fx.gw.deps.logger, retentionDays: 30 });
    const removal = retention.runOnce();
    // Meanwhile shipments keep coming and their deliveries keep being made and recorded.
    let shipped = 0;
    let removalDone = false;
    void removal.then(() => (removalDone = true));
    while (!removalDone && shipped < 200) {
      await ship(1000 + shipped, 10);
      shipped += 10;
    }
    expect(await removal).toEqual({ entregas: 3000, entrega_intentos: 3000, outbox: 3000 });
    expect(shipped).toBeGreaterThan(0);
    await fx.receiver.waitFor(shipped, 20_000);
    await eventually(async () => (await count(fx.pool, `select count(*) n from entregas where estado = 'exitosa'`)) === shipped, 15_000, 'stream recorded');
    expect(await count(fx.pool, 'select count(*) n from entregas')).toBe(shipped);
    expect(await count(fx.pool, `select count(*) n from entrega_intentos`)).toBe(shipped);
    expect(await count(fx.pool, `select count(*) n from outbox where data ->> 'numeroGuia' like 'SVCOLD%'`)).toBe(0);
  }, 60_000);

  it('a day without its partitions: shipments and deliveries land in the DEFAULT partitions, and the upkeep moves them into the day it makes', async () => {
    // Today's partitions gone (as if the upkeep had not run for a week, or the clock jumped ahead).
    const today = (await fx.pool.query<{ d: string }>(`select to_char(now() at time zone 'UTC', 'YYYYMMDD') d`)).rows[0]!.d;
    await fx.pool.query(`drop table if exists outbox_p${today}, entregas_p${today}, entrega_intentos_p${today}`);
    await ship(1, 5);
    await eventually(async () => (await ended()) === 5, 15_000, 'deliveries recorded');
    await fx.receiver.waitFor(5, 10_000);
    expect(await count(fx.pool, 'select count(*) n from outbox_default')).toBe(5);
    expect(await count(fx.pool, 'select count(*) n from entregas_default')).toBe(5);
    expect(await count(fx.pool, 'select count(*) n from entrega_intentos_default')).toBe(5);

    await fx.dispatcher.retention.runOnce();
    for (const table of ['outbox', 'entregas', 'entrega_intentos']) {
      expect(await count(fx.pool, `select count(*) n from ${table}_default`)).toBe(0);
      expect(await count(fx.pool, `select count(*) n from ${table}_p${today}`)).toBe(5);
    }
    // The delivery log still reads them, and new ones go to the day's partition.
    const webhookId = (await fx.pool.query<{ id: string }>('select id from webhooks')).rows[0]!.id;
    const log = await fx.gw.http.get(`/api/v1/webhooks/${webhookId}/entregas`).set('Authorization', bearer(company.live));
    expect(log.status).toBe(200);
    expect(log.body.data.entregas).toHaveLength(5);
    await ship(10, 1);
    await eventually(async () => (await ended()) === 6, 15_000, 'a later delivery recorded');
    expect(await count(fx.pool, `select count(*) n from entregas_p${today}`)).toBe(6);
  }, 60_000);
});
