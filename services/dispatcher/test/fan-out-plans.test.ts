import { createDb, createPool, insertNewDeliveries, markFannedOut, partitionRange, type Db } from '@svc/platform';
import { createTestDatabase, type TestDatabase } from '../../../test/support/test-database';
import { findRoutedDeliveries } from '../src/deliveries/delivery.repository';
import { routedWebhooks } from '../src/webhooks/webhook.repository';

/**
 * The fan-out's statements run prepared on a generic plan, made on a connection's first run and
 * kept until the tables are analyzed. Made while `entregas` held a few rows (a new database, a
 * fresh deploy), a plain join planned a sequential scan of the table and kept it as the table grew,
 * and the fan-out slowed to a crawl (bench/HISTORY.md). Both the routes read and the insert must
 * stay index probes.
 */
describe('the fan-out statements on a generic plan', () => {
  let database: TestDatabase;
  let pool: ReturnType<typeof createPool>;
  let db: Db;

  beforeAll(async () => {
    database = await createTestDatabase();
    // One connection, so the statement's plan is the one this test looks at.
    pool = createPool({ connectionString: database.url, max: 1, genericPlans: true });
    db = createDb(pool);
  });
  afterAll(async () => {
    await pool?.end();
    await database?.drop();
  });

  it('planned on nearly empty tables, probes the unique index and the routing index once they are full', async () => {
    const empresaId = (await pool.query<{ id: string }>(`insert into empresas (nombre, verificada) values ('plans', true) returning id`)).rows[0]!.id;
    const webhookId = (
      await pool.query<{ id: string }>(`insert into webhooks (empresa_id, url, secret, eventos) values ($1, 'https://receiver.test/hook', 'whsec_x', '{}') returning id`, [empresaId])
    ).rows[0]!.id;
    const event = (eventId: string) => ({ eventId, event: 'GUIA_CREADA' as const, companyId: empresaId, branchId: null, mode: 'live' as const });

    // First run: the plan is made now, with entregas nearly empty (a few deliveries, never
    // analyzed), as on a new database: there a plain join hashed a sequential scan of it.
    const grow = (n: number) =>
      pool.query(
        `insert into entregas (id, webhook_id, evento_id, evento, numero_guia, estado, exitoso, intentos)
         select gen_random_uuid(), $1, gen_random_uuid(), 'GUIA_CREADA', 'G' || i, 'exitosa', true, 1 from generate_series(1, ${n}) i`,
        [webhookId],
      );
    await grow(50);
    // Jobs queued before they carried their event's day: every day is looked in.
    const first = await findRoutedDeliveries(db, routedWebhooks([event('00000000-0000-4000-8000-000000000001')]), partitionRange([undefined]));
    expect(first.routes).toEqual([expect.objectContaining({ existing: null })]);

    // The tables grow: 20,000 deliveries, 2,000 more webhooks of other companies.
    await grow(20_000);
    await pool.query(
      `with e as (insert into empresas (nombre, verificada) select 'other ' || i, true from generate_series(1, 2000) i returning id)
       insert into webhooks (empresa_id, url, secret, eventos) select id, 'https://receiver.test/other', 'whsec_x', '{}' from e`,
    );
    // No ANALYZE: it would invalidate the cached plan (as autovacuum's would, where it runs; the
    // bench's Postgres runs without it), and this test is about the plan that was kept.

    const known = (await pool.query<{ evento_id: string }>('select evento_id from entregas limit 1')).rows[0]!.evento_id;
    const again = await findRoutedDeliveries(db, routedWebhooks([event(known)]), partitionRange([undefined]));
    expect(again.routes).toEqual([expect.objectContaining({ eventId: known, existing: expect.objectContaining({ estado: 'exitosa', intentos: 1 }) })]);

    const stats = await pool.query<{ generic_plans: string; custom_plans: string }>(
      `select generic_plans, custom_plans from pg_prepared_statements where name = 'find_routed_deliveries'`,
    );
    expect(stats.rows).toEqual([{ generic_plans: '2', custom_plans: '0' }]);
    // The very plan the statement kept: the session's prepared statement, explained with parameters.
    const plan = (
      // EXECUTE takes no bind parameters; the values are uuids read from the database.
      await pool.query<{ 'QUERY PLAN': string }>(
        `explain (costs off) execute find_routed_deliveries('{${known}}', '{GUIA_CREADA}', '{${empresaId}}', '{NULL}', '{live}', '{NULL}', '-infinity', 'infinity')`,
      )
    ).rows
      .map((r) => r['QUERY PLAN'])
      .join('\n');
    // One probe of the unique index per day partition (entregas is partitioned by day: the event's
    // day is not known to the read, so every partition's part of the index is probed), none scanned.
    expect(plan).toMatch(/Index Scan using entregas_p\d{8}_evento_id_webhook_id_particion_en_idx on entregas_p\d{8}/);
    expect(plan.match(/Index Scan using entregas_\w+_evento_id_webhook_id_particion_en_idx/g)?.length).toBe(
      (plan.match(/on entregas_(p\d{8}|default)\b/g) ?? []).length,
    );
    expect(plan).toMatch(/webhooks_routing_idx/);
    expect(plan).not.toMatch(/Seq Scan on (entregas|webhooks)/);

    // With the event's day known (jobs carry it), the same kept plan prunes every other day's
    // partition as it starts: one probe, of that day's part of the index.
    const days = partitionRange([new Date().toISOString()]);
    const pruned = (
      await pool.query<{ 'QUERY PLAN': string }>(
        `explain (costs off) execute find_routed_deliveries('{${known}}', '{GUIA_CREADA}', '{${empresaId}}', '{NULL}', '{live}', '{NULL}', '${days.from}', '${days.to}')`,
      )
    ).rows
      .map((r) => r['QUERY PLAN'])
      .join('\n');
    expect(plan.match(/on entregas_(p\d{8}|default)\b/g)?.length).toBeGreaterThan(2);
    expect(pruned.match(/on entregas_(p\d{8}|default)\b/g)?.length ?? 0).toBeLessThanOrEqual(2);
    expect(pruned).toMatch(/Subplans Removed: \d+/);
  }, 30_000);

  it('planned on a few webhooks, the insert checks each row\'s webhook by its key once there are thousands', async () => {
    const own = await createTestDatabase();
    const onePool = createPool({ connectionString: own.url, max: 1, genericPlans: true });
    try {
      const ownDb = createDb(onePool);
      const empresaId = (await onePool.query<{ id: string }>(`insert into empresas (nombre, verificada) values ('plans', true) returning id`)).rows[0]!.id;
      const webhookId = (
        await onePool.query<{ id: string }>(`insert into webhooks (empresa_id, url, secret, eventos) values ($1, 'https://receiver.test/hook', 'whsec_x', '{}') returning id`, [empresaId])
      ).rows[0]!.id;
      const deferred = (id: string, eventId: string) => ({ id, webhookId, eventId, event: 'GUIA_CREADA' as const, numeroGuia: 'G', attempt: null, nextAt: new Date() });
      // First run: the plan is made now, with one webhook.
      const first = await insertNewDeliveries(ownDb, [deferred('00000000-0000-4000-8000-000000000001', '00000000-0000-4000-8000-000000000002')], markFannedOut([]));
      expect(first.size).toBe(1);

      await onePool.query(
        `with e as (insert into empresas (nombre, verificada) select 'other ' || i, true from generate_series(1, 5000) i returning id)
         insert into webhooks (empresa_id, url, secret, eventos) select id, 'https://receiver.test/other', 'whsec_x', '{}' from e`,
      );
      const plan = (
        // EXECUTE takes no bind parameters: one deferred delivery, no attempt, no event to mark.
        await onePool.query<{ 'QUERY PLAN': string }>(
          `explain (costs off) execute insert_new_deliveries('{}', '-infinity', 'infinity', '{00000000-0000-4000-8000-000000000003}', '{${webhookId}}',
             '{00000000-0000-4000-8000-000000000004}', '{GUIA_CREADA}', '{G}', '{pendiente}', '{0}', '{0}', '{NULL}', '{NULL}',
             '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}')`,
        )
      ).rows
        .map((r) => r['QUERY PLAN'])
        .join('\n');
      expect(plan).toMatch(/Index Only Scan using webhooks_pkey on webhooks/);
      expect(plan).not.toMatch(/Seq Scan on (webhooks|entregas)/);
    } finally {
      await onePool.end();
      await own.drop();
    }
  }, 30_000);
});
