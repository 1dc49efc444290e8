import { createDb, createPool, ensurePartitions, type Db } from '@svc/platform';
import { createTestDatabase, type TestDatabase } from '../../../test/support/test-database';
import { deliveryLogQuery, type DeliveryFilters, type LogPosition, type LogReader } from '../src/deliveries/delivery.repository';

const EMPRESA = '11111111-1111-4111-8111-111111111111';
const BRANCH = '22222222-2222-4222-8222-222222222222';
const OTHER_BRANCH = '33333333-3333-4333-8333-333333333333';
const WEBHOOK = '44444444-4444-4444-8444-444444444444';
const DELIVERIES = 100_000;
/** A page as the service asks for it: `limit` (50 by default) and one more to know if another follows. */
const PAGE = 51;

/** One node of `explain (format json)`, the fields looked at here. */
interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  'Rows Removed by Filter'?: number;
  Plans?: PlanNode[];
}

const nodesOf = (node: PlanNode): PlanNode[] => [node, ...(node.Plans ?? []).flatMap(nodesOf)];

/**
 * The delivery log's query (`deliveryLogQuery`, the very builder the service runs) explained on a
 * webhook with 100,000 deliveries over 14 days, among 196,000 of 49 other companies' webhooks, after
 * `vacuum analyze`: each filter it builds is answered by an index of `entregas` in the log's order
 * (no Seq Scan, no Sort), and the filters that pick few rows read only their page. `entregas` is
 * partitioned by day on its events' creation, not on `created_at`, so the log reads every day's
 * partition along that partition's part of the index, merged in the log's order (Merge Append):
 * each partition gives its first rows, and only the page is read in all.
 */
describe('the delivery log\'s plans on a webhook with 100,000 deliveries', () => {
  let database: TestDatabase;
  let pool: ReturnType<typeof createPool>;
  let db: Db;
  let cursor: LogPosition;
  /** Each partition's index to the partitioned index it is part of. */
  const parentIndex = new Map<string, string>();
  const ofIndex = (name: string | undefined): string | undefined => (name === undefined ? undefined : (parentIndex.get(name) ?? name));
  /**
   * The partitions that hold rows. The days ahead are empty, and analyzed so: the planner reads
   * such a partition whole (no pages, no cost) rather than through an index, which says nothing of
   * the plans of days with rows, the ones looked at here.
   */
  const filled = new Set<string>();

  beforeAll(async () => {
    database = await createTestDatabase();
    pool = createPool({ connectionString: database.url, max: 1 });
    db = createDb(pool);
    // The partitions of the 15 days the rows span, as the upkeep would have made them.
    await ensurePartitions(db, ['outbox', 'entregas'], new Date(Date.now() - 15 * 86_400_000));
    await ensurePartitions(db, ['outbox', 'entregas'], new Date(Date.now() - 7 * 86_400_000));
    await pool.query(`insert into empresas (id, nombre, verificada, sucursales_habilitadas) values ($1, 'plans', true, true)`, [EMPRESA]);
    await pool.query(`insert into sucursales (id, empresa_id, nombre) values ($2, $1, 'B1'), ($3, $1, 'B2')`, [EMPRESA, BRANCH, OTHER_BRANCH]);
    await pool.query(`insert into webhooks (id, empresa_id, url, secret, eventos) values ($1, $2, 'https://receiver.test/w', 'x', '{}')`, [WEBHOOK, EMPRESA]);
    // 100,000 events over 14 days (one per 12 s), a tenth of them the branch's and a tenth another
    // branch's; events as a courier's mix: creations to updates, 1% each for the rarest.
    await pool.query(
      `insert into outbox (id, empresa_id, sucursal_id, evento, data, created_at, enviado_en, repartido_en, secuencia, modo)
       select gen_random_uuid(), $1,
         case (g / 7) % 10 when 0 then $2::uuid when 1 then $3::uuid end,
         case when g % 100 < 30 then 'GUIA_CREADA' when g % 100 < 50 then 'GUIA_RECOLECTADA' when g % 100 < 65 then 'GUIA_EN_BODEGA'
              when g % 100 < 80 then 'GUIA_EN_RUTA' when g % 100 < 94 then 'GUIA_ENTREGADA' when g % 100 < 97 then 'GUIA_INTENTO_FALLIDO'
              when g % 100 = 97 then 'GUIA_DEVOLUCION' when g % 100 = 98 then 'GUIA_ANULADA' else 'GUIA_ACTUALIZADA' end,
         jsonb_build_object('numeroGuia', 'SVC' || lpad(g::text, 10, '0')),
         now() - interval '14 days' + g * interval '12 seconds', now(), now(), 1, 'live'
       from generate_series(1, $4::int - 100) g`,
      [EMPRESA, BRANCH, OTHER_BRANCH, DELIVERIES],
    );
    // The webhook's deliveries of them: 90% exitosa, 8% fallida, 2% pendiente; and 100 PINGs.
    await pool.query(
      `insert into entregas (id, webhook_id, evento_id, evento, numero_guia, estado, exitoso, status_code, intentos, ultimo_intento_en, created_at, particion_en)
       select gen_random_uuid(), $1, o.id, o.evento, o.data ->> 'numeroGuia', st.estado, st.estado = 'exitosa', 200, 1, o.created_at, o.created_at, o.created_at
       from (select o.*, row_number() over (order by created_at) g from outbox o) o
       cross join lateral (select case when o.g * 37 % 100 < 90 then 'exitosa' when o.g * 37 % 100 < 98 then 'fallida' else 'pendiente' end as estado) st`,
      [WEBHOOK],
    );
    await pool.query(
      `insert into entregas (id, webhook_id, evento_id, evento, estado, exitoso, status_code, intentos, ultimo_intento_en, created_at, particion_en)
       select gen_random_uuid(), $1, null, 'PING', 'exitosa', true, 200, 1, now() - g * interval '3 hours', now() - g * interval '3 hours', now() - g * interval '3 hours'
       from generate_series(1, 100) g`,
      [WEBHOOK],
    );
    // Other companies' webhooks in the same table, over the same days.
    await pool.query(
      `with e as (insert into empresas (nombre, verificada) select 'other ' || i, true from generate_series(1, 49) i returning id),
       w as (insert into webhooks (empresa_id, url, secret, eventos) select id, 'https://receiver.test/other', 'x', '{}' from e returning id)
       insert into entregas (id, webhook_id, evento_id, evento, estado, exitoso, status_code, intentos, ultimo_intento_en, created_at, particion_en)
       select gen_random_uuid(), w.id, gen_random_uuid(), 'GUIA_CREADA', case when g % 10 = 0 then 'fallida' else 'exitosa' end, g % 10 <> 0, 200, 1,
         now() - g * interval '5 minutes', now() - g * interval '5 minutes', now() - g * interval '5 minutes'
       from w cross join generate_series(1, 4000) g`,
    );
    await pool.query('vacuum analyze entregas');
    await pool.query('vacuum analyze outbox');
    expect(Number((await pool.query<{ n: string }>('select count(*) n from entregas_default')).rows[0]!.n)).toBe(0);
    const days = await pool.query<{ n: string }>(`select count(distinct tableoid) n from entregas where webhook_id = $1`, [WEBHOOK]);
    expect(Number(days.rows[0]!.n)).toBeGreaterThanOrEqual(14);
    const children = await pool.query<{ child: string; parent: string }>(
      `select c.relname child, p.relname parent from pg_inherits i join pg_class c on c.oid = i.inhrelid join pg_class p on p.oid = i.inhparent where c.relkind = 'i'`,
    );
    for (const r of children.rows) parentIndex.set(r.child, r.parent);
    for (const table of ['entregas', 'outbox']) {
      const parts = await pool.query<{ t: string }>(`select distinct tableoid::regclass::text t from ${table}`);
      for (const r of parts.rows) filled.add(r.t);
    }
    expect(Number((await pool.query<{ n: string }>('select count(*) n from entregas where webhook_id = $1', [WEBHOOK])).rows[0]!.n)).toBe(DELIVERIES);
    // A cursor in the middle of the log: page 100's last delivery.
    const at = await pool.query<{ at: string; id: string }>(
      `select created_at::text at, id from entregas where webhook_id = $1 order by created_at desc, id desc offset 5000 limit 1`,
      [WEBHOOK],
    );
    cursor = at.rows[0]!;
  }, 180_000);

  afterAll(async () => {
    await pool?.end();
    await database?.drop();
  });

  const day = (daysAgo: number) => new Date(Date.now() - daysAgo * 86_400_000);

  /** The plan of the log's query as the service builds it, run (analyze) with its parameters. */
  const plan = async (filters: DeliveryFilters, after?: LogPosition, reader: LogReader = 'all'): Promise<PlanNode> => {
    const compiled = deliveryLogQuery(db, WEBHOOK, filters, PAGE, after, reader).compile();
    const res = await pool.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(`explain (analyze, timing off, format json) ${compiled.sql}`, [...compiled.parameters]);
    return res.rows[0]!['QUERY PLAN'][0]!.Plan;
  };

  /** The scans of `entregas`' partitions, each as the partitioned index it reads. */
  const entregasScans = (root: PlanNode) =>
    nodesOf(root)
      .filter((n) => n['Relation Name']?.startsWith('entregas_') && filled.has(n['Relation Name']))
      .map((n) => ({ ...n, 'Index Name': ofIndex(n['Index Name']) }));
  const rowsRead = (scans: PlanNode[]) => scans.reduce((sum, n) => sum + (n['Actual Rows'] ?? 0) + (n['Rows Removed by Filter'] ?? 0), 0);

  type Case = [name: string, filters: DeliveryFilters, after: boolean, index: string, exact: boolean];
  const cases: Case[] = [
    ['no filter', {}, false, 'entregas_webhook_idx', true],
    ['the cursor', {}, true, 'entregas_webhook_idx', true],
    ['desde and hasta', { desde: day(9), hasta: day(8) }, false, 'entregas_webhook_idx', true],
    ['desde only, with the cursor', { desde: day(13) }, true, 'entregas_webhook_idx', true],
    ['estado=fallida', { estado: 'fallida' }, false, 'entregas_webhook_estado_idx', true],
    ['estado=pendiente', { estado: 'pendiente' }, false, 'entregas_webhook_estado_idx', true],
    ['estado=pendiente, with the cursor', { estado: 'pendiente' }, true, 'entregas_webhook_estado_idx', true],
    ['estado=fallida in a window', { estado: 'fallida', desde: day(12), hasta: day(11) }, false, 'entregas_webhook_estado_idx', true],
    // 90% of the rows: the webhook's own index, a few rows skipped per page.
    ['estado=exitosa', { estado: 'exitosa' }, false, 'entregas_webhook_idx', false],
    ['exitoso=true', { exitoso: true }, false, 'entregas_webhook_idx', false],
    ['exitoso=false', { exitoso: false }, false, 'entregas_webhook_sin_exito_idx', true],
    ['exitoso=false, with the cursor', { exitoso: false }, true, 'entregas_webhook_sin_exito_idx', true],
    ['evento=GUIA_CREADA', { evento: 'GUIA_CREADA' }, false, 'entregas_webhook_evento_idx', true],
    ['evento=GUIA_DEVOLUCION (1%)', { evento: 'GUIA_DEVOLUCION' }, false, 'entregas_webhook_evento_idx', true],
    ['evento=PING (0.1%)', { evento: 'PING' }, false, 'entregas_webhook_evento_idx', true],
    ['evento in a window, with the cursor', { evento: 'GUIA_EN_RUTA', desde: day(14) }, true, 'entregas_webhook_evento_idx', true],
  ];

  it.each(cases)('%s: an index scan of each day, merged in the log\'s order', async (_name, filters, withCursor, index, exact) => {
    const root = await plan(filters, withCursor ? cursor : undefined);
    const scans = entregasScans(root);
    expect(scans.length).toBeGreaterThanOrEqual(14);
    expect(scans.map((n) => n['Node Type'])).not.toContain('Seq Scan');
    expect(root['Actual Rows']).toBe(PAGE);
    const bitmaps = nodesOf(root).filter((n) => n['Node Type'] === 'Bitmap Index Scan');
    if (bitmaps.length > 0 || nodesOf(root).some((n) => n['Node Type'] === 'Sort')) {
      // A filter that matches hardly more than a page (PING, 0.1%) may be read whole, along the same
      // index or through a bitmap of it, and its few rows sorted, as the planner's sampled statistics
      // decide: still the index, never the table, and no more rows than two pages.
      const indexes = [...bitmaps, ...scans.filter((n) => n['Node Type'] !== 'Bitmap Heap Scan')].map((n) => ofIndex(n['Index Name']));
      expect(new Set(indexes)).toEqual(new Set([index]));
      expect(rowsRead(scans)).toBeLessThanOrEqual(2 * PAGE);
      return;
    }
    expect(new Set(scans.map((n) => n['Node Type']))).toEqual(new Set([expect.stringMatching(/^Index (Only )?Scan$/)]));
    // The filter's index in the days where the webhook has many rows; a day where it has few (today,
    // so far) may be read along the webhook's own index, in the same order.
    const used = new Set(scans.map((n) => n['Index Name']));
    expect(used).toContain(index);
    for (const name of used) expect([index, 'entregas_webhook_idx']).toContain(name);
    // The days' indexes give the log's order: they are merged, nothing is sorted, each day's scan
    // stops once the page is full.
    expect(nodesOf(root).map((n) => n['Node Type'])).not.toContain('Sort');
    if (exact) expect(scans.filter((n) => n['Index Name'] === index).reduce((sum, n) => sum + (n['Rows Removed by Filter'] ?? 0), 0)).toBe(0);
    // The page, plus at most a row each partition gave the merge to compare, plus the rows skipped
    // by a filter most rows pass, or by a day read along the webhook's own index (for GUIA_CREADA,
    // 30% of the rows, about two skipped per row read).
    const skipping = !exact || used.size > 1;
    expect(rowsRead(scans)).toBeLessThan((skipping ? 4 * PAGE : PAGE) + scans.length);
  });

  it('estado and evento together: one of their indexes, never a scan of the table', async () => {
    const scans = entregasScans(await plan({ estado: 'fallida', evento: 'GUIA_EN_RUTA' }));
    expect(scans.length).toBeGreaterThanOrEqual(14);
    for (const scan of scans) expect(['entregas_webhook_estado_idx', 'entregas_webhook_evento_idx']).toContain(scan['Index Name']);
  });

  it.each([
    ['no filter', {}],
    ['estado=fallida', { estado: 'fallida' }],
    ['evento=GUIA_CREADA', { evento: 'GUIA_CREADA' }],
  ] as Array<[string, DeliveryFilters]>)('a branch reading the company webhook (%s): the same index, each event\'s branch probed by its key', async (_name, filters) => {
    const root = await plan(filters, undefined, { branchId: BRANCH });
    const nodes = nodesOf(root);
    expect(nodes.filter((n) => n['Node Type'] === 'Seq Scan' && filled.has(n['Relation Name'] ?? ''))).toEqual([]);
    expect(nodes.map((n) => n['Node Type'])).not.toContain('Sort');
    const index = filters.estado ? 'entregas_webhook_estado_idx' : filters.evento ? 'entregas_webhook_evento_idx' : 'entregas_webhook_idx';
    // As without a branch: the filter's index, or in a day of few rows the webhook's own.
    const used = new Set(entregasScans(root).map((n) => n['Index Name']));
    expect(used).toContain(index);
    for (const name of used) expect([index, 'entregas_webhook_idx']).toContain(name);
    // Each event's branch: one probe of each day's part of outbox's primary key (by its id alone).
    const outboxScans = nodes.filter((n) => n['Relation Name']?.startsWith('outbox_') && filled.has(n['Relation Name']));
    expect(outboxScans.length).toBeGreaterThan(0);
    expect(new Set(outboxScans.map((n) => ofIndex(n['Index Name'])))).toEqual(new Set(['outbox_pkey']));
    expect(root['Actual Rows']).toBe(PAGE);
  });
});
