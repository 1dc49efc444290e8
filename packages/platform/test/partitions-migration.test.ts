import { randomBytes } from 'node:crypto';
import { Migrator } from 'kysely';
import pg from 'pg';
import { createDb, createPool, listDayPartitions, migrateToLatest, partitionName, PARTITIONS_AHEAD_DAYS, dayOf, type Db } from '../src';
import { migrations } from '../src/db/migrations';
import { adminUrl, TEST_DATABASE_BASE } from '../../../test/support/env';

const BEFORE = '20261129090000_deferred_deliveries';
const DAY_MS = 86_400_000;
const DAYS = 5;
const PER_DAY = 40;

/**
 * 20261202090000_partitions on a database at the migration before it, holding rows of every table
 * it converts spread over five days (deliveries with attempts, resends, PINGs, events, activity
 * entries, idempotency keys): every row is kept with its values, each lands in its day's
 * partition, and the delivery log, the fan-out and the reconciler still read along their indexes.
 */
describe('migration 20261202090000_partitions', () => {
  const name = `svc_t_mig_${randomBytes(5).toString('hex')}`;
  let pool: pg.Pool;
  let db: Db;
  const webhookId = '44444444-4444-4444-8444-444444444444';
  const empresaId = '11111111-1111-4111-8111-111111111111';
  const snapshot: Record<string, string[]> = {};

  // Each table's rows as text, in a fixed order, to compare before and after.
  const rowsOf = async (table: string, columns: string, order: string): Promise<string[]> =>
    (await pool.query<{ r: string }>(`select (${columns})::text as r from ${table} order by ${order}`)).rows.map((r) => r.r);
  const tables: Array<[string, string, string]> = [
    ['outbox', 'id, empresa_id, sucursal_id, evento, data, request_id, created_at, enviado_en, repartido_en, secuencia, modo', 'id'],
    [
      'entregas',
      'id, webhook_id, evento_id, evento, estado, exitoso, status_code, intentos, ultimo_intento_en, created_at, proximo_intento_en, numero_guia, reenvio_de, es_reenvio, diferida',
      'id',
    ],
    ['entrega_intentos', 'entrega_id, numero, fecha, status_code, duracion_ms, error, mensaje, respuesta', 'entrega_id, numero'],
    ['actividad', 'id, empresa_id, usuario, accion, sucursal_id, webhook_id, detalle, created_at', 'id'],
    ['idempotencia', 'scope, clave, request_hash, status_code, response, created_at', 'scope, clave'],
  ];

  beforeAll(async () => {
    const admin = new pg.Client({ connectionString: adminUrl() });
    await admin.connect();
    await admin.query(`create database "${name}"`);
    await admin.end();
    pool = createPool({ connectionString: `${TEST_DATABASE_BASE}/${name}`, max: 2 });
    db = createDb(pool);
    const migrator = new Migrator({ db, provider: { getMigrations: () => Promise.resolve(migrations) } });
    const to = await migrator.migrateTo(BEFORE);
    expect(to.error).toBeUndefined();

    await pool.query(`insert into empresas (id, nombre, verificada) values ($1, 'mig', true)`, [empresaId]);
    await pool.query(`insert into webhooks (id, empresa_id, url, secret, eventos) values ($1, $2, 'https://receiver.test/w', 'x', '{}')`, [webhookId, empresaId]);
    // Events over five days (the last one today), each with its delivery a second later, one to
    // three attempts, a tenth still pending; a resend of every tenth, made a day later; PINGs.
    await pool.query(
      `insert into outbox (id, empresa_id, evento, data, created_at, enviado_en, repartido_en, secuencia, modo)
       select md5('ev' || g)::uuid, $1, 'GUIA_CREADA', jsonb_build_object('numeroGuia', 'G' || g),
         now() - ($2::int - 1) * interval '1 day' - interval '1 hour' + (g % $3) * interval '1 minute' + (g / $3) * interval '1 day', now(), now(), 1, 'live'
       from generate_series(0, $2::int * $3::int - 1) g`,
      [empresaId, DAYS, PER_DAY],
    );
    await pool.query(
      `insert into entregas (id, webhook_id, evento_id, evento, numero_guia, estado, exitoso, status_code, intentos, ultimo_intento_en, created_at, proximo_intento_en)
       select md5('d' || o.id)::uuid, $1, o.id, o.evento, o.data ->> 'numeroGuia',
         case when row_number() over (order by o.id) % 10 = 0 then 'pendiente' else 'exitosa' end,
         row_number() over (order by o.id) % 10 <> 0, 200, 1 + (row_number() over (order by o.id) % 3)::int,
         o.created_at + interval '1 second', o.created_at + interval '1 second',
         case when row_number() over (order by o.id) % 10 = 0 then now() end
       from outbox o`,
      [webhookId],
    );
    await pool.query(
      `insert into entrega_intentos (entrega_id, numero, fecha, status_code, duracion_ms)
       select e.id, n, e.created_at + (n - 1) * interval '1 second', 200, 10 from entregas e cross join lateral generate_series(1, e.intentos) n`,
    );
    await pool.query(
      `insert into entregas (id, webhook_id, evento_id, evento, numero_guia, estado, exitoso, intentos, created_at, reenvio_de, es_reenvio)
       select md5('r' || e.id)::uuid, e.webhook_id, e.evento_id, e.evento, e.numero_guia, 'exitosa', true, 1, e.created_at + interval '1 day', e.id, true
       from entregas e where e.estado = 'exitosa' and e.intentos = 2 and e.created_at < now() - interval '1 day'`,
    );
    await pool.query(
      `insert into entregas (id, webhook_id, evento, estado, exitoso, intentos, created_at)
       select md5('p' || g)::uuid, $1, 'PING', 'exitosa', true, 1, now() - g * interval '1 day' from generate_series(0, $2::int - 1) g`,
      [webhookId, DAYS],
    );
    await pool.query(
      `insert into actividad (empresa_id, usuario, accion, detalle, created_at)
       select $1, 'operador', 'webhook.creado', jsonb_build_object('n', g), now() - (g % $2) * interval '1 day' from generate_series(1, 100) g`,
      [empresaId, DAYS],
    );
    await pool.query(
      `insert into idempotencia (scope, clave, request_hash, status_code, response, created_at)
       select 't:/api/v1/guias', 'k' || g, 'h' || g, 201, to_jsonb('{"ok":' || g || '}'), now() - (g % 3) * interval '20 hours' from generate_series(1, 30) g`,
    );
    for (const [table, columns, order] of tables) snapshot[table] = await rowsOf(table, columns, order);

    await migrateToLatest(db);
  }, 60_000);

  afterAll(async () => {
    await pool?.end();
    const admin = new pg.Client({ connectionString: adminUrl() });
    await admin.connect();
    await admin.query(`drop database if exists "${name}" with (force)`);
    await admin.end();
  });

  it.each(tables)('keeps every row of %s with its values', async (table, columns, order) => {
    expect(snapshot[table]!.length).toBeGreaterThan(0);
    expect(await rowsOf(table, columns, order)).toEqual(snapshot[table]);
  });

  it('puts each row in the partition of its day, none in the DEFAULT partitions', async () => {
    for (const [table] of tables) {
      expect(Number((await pool.query<{ n: string }>(`select count(*) n from ${table}_default`)).rows[0]!.n)).toBe(0);
      const misplaced = await pool.query(
        `select tableoid::regclass::text as part, ${table.startsWith('entrega') ? 'particion_en' : 'created_at'} as key from ${table}
         where tableoid::regclass::text <> '${table}_p' || to_char(${table.startsWith('entrega') ? 'particion_en' : 'created_at'} at time zone 'UTC', 'YYYYMMDD')`,
      );
      expect(misplaced.rows).toEqual([]);
    }
  });

  it('keys an event\'s delivery and its attempts by the event\'s creation, a resend or a PING by its own', async () => {
    const wrong = await pool.query(`
      select e.id from entregas e left join outbox o on o.id = e.evento_id and not e.es_reenvio
      where e.particion_en <> coalesce(o.created_at, e.created_at)
      union all
      select i.entrega_id from entrega_intentos i join entregas e on e.id = i.entrega_id where i.particion_en <> e.particion_en`);
    expect(wrong.rows).toEqual([]);
    expect(Number((await pool.query<{ n: string }>('select count(*) n from entregas where es_reenvio')).rows[0]!.n)).toBeGreaterThan(0);
  });

  it('makes the partitions of every day with rows, today and the week ahead', async () => {
    const today = dayOf(new Date());
    const names = (await listDayPartitions(db, 'entregas')).map((p) => p.name);
    for (let i = -(DAYS - 1); i <= PARTITIONS_AHEAD_DAYS; i++) expect(names).toContain(partitionName('entregas', new Date(today.getTime() + i * DAY_MS)));
    for (const table of ['outbox', 'entrega_intentos', 'actividad', 'idempotencia'] as const) {
      expect((await listDayPartitions(db, table)).map((p) => p.name)).toContain(partitionName(table, new Date(today.getTime() + PARTITIONS_AHEAD_DAYS * DAY_MS)));
    }
  });

  it('numbers new activity entries after the copied ones', async () => {
    const max = Number((await pool.query<{ m: string }>('select max(id) m from actividad')).rows[0]!.m);
    const next = await pool.query<{ id: string }>(`insert into actividad (empresa_id, usuario, accion) values ($1, 'api', 'x') returning id`, [empresaId]);
    expect(Number(next.rows[0]!.id)).toBe(max + 1);
    await expect(pool.query('delete from actividad')).rejects.toThrow(/append-only/);
  });

  type Ids = { webhook: string; event: string; delivery: string; company: string };
  it.each<[string, string, (ids: Ids) => unknown[], string]>([
    ['the delivery log', 'select id from entregas where webhook_id = $1 order by created_at desc, id desc limit 51', (i) => [i.webhook], 'entregas_p\\d+_webhook_id_created_at_id_idx'],
    [
      "the fan-out's probe of an event's delivery",
      'select id from entregas where evento_id = $1 and webhook_id = $2 and evento_id is not null and not es_reenvio limit 1',
      (i) => [i.event, i.webhook],
      'entregas_p\\d+_evento_id_webhook_id_particion_en_idx',
    ],
    [
      "the reconciler's overdue deliveries",
      "select id from entregas where estado = 'pendiente' and proximo_intento_en < now() + interval '1 hour' order by proximo_intento_en limit 100",
      () => [],
      'entregas_p\\d+_proximo_intento_en_idx',
    ],
    ['a delivery by its id', 'select id from entregas where id = $1', (i) => [i.delivery], 'entregas_p\\d+_pkey'],
    ['an event by its id', 'select id from outbox where id = $1', (i) => [i.event], 'outbox_p\\d+_pkey'],
    ["a delivery's attempts", 'select numero from entrega_intentos where entrega_id = $1', (i) => [i.delivery], 'entrega_intentos_p\\d+_pkey'],
    ["a company's activity, newest first", 'select id from actividad where empresa_id = $1 order by id desc limit 20', (i) => [i.company], 'actividad_p\\d+_empresa_id_id_idx'],
  ])('%s reads along its index in each partition', async (_name, query, params, index) => {
    const client = await pool.connect();
    try {
      await client.query('analyze');
      const event = (await client.query<{ id: string }>('select id from outbox limit 1')).rows[0]!.id;
      const delivery = (await client.query<{ id: string }>('select id from entregas where not es_reenvio limit 1')).rows[0]!.id;
      // The tables are small: without this the planner reads a few pages rather than an index,
      // and this is about the indexes each partition has for the query's shape.
      await client.query('set enable_seqscan = off');
      const plan = (
        await client.query<{ 'QUERY PLAN': string }>(`explain (analyze, costs off, timing off) ${query}`, params({ webhook: webhookId, event, delivery, company: empresaId }))
      ).rows
        .map((r) => r['QUERY PLAN'])
        .join('\n');
      expect(plan).toMatch(new RegExp(`Index (Only )?Scan (Backward )?using ${index}`));
      expect(plan).not.toMatch(/Seq Scan on \w+_p\d+/);
    } finally {
      await client.query('reset enable_seqscan');
      client.release();
    }
  });

  it('goes down to plain tables and up again, every row kept both ways', async () => {
    const kinds = async () =>
      (await pool.query<{ relname: string; relkind: string }>(`select relname, relkind from pg_class where relname = any($1::text[]) order by relname`, [tables.map((t) => t[0])])).rows;
    const migrator = new Migrator({ db, provider: { getMigrations: () => Promise.resolve(migrations) } });
    // Down to the migration before this one: the later ones go down first.
    const down = await migrator.migrateTo('20261202080000_queue_shards');
    expect(down.error).toBeUndefined();
    expect((await kinds()).map((k) => k.relkind)).toEqual(['r', 'r', 'r', 'r', 'r']);
    for (const [table, columns, order] of tables) expect(await rowsOf(table, columns, order)).toEqual(expect.arrayContaining(snapshot[table]!));
    await migrateToLatest(db);
    expect((await kinds()).map((k) => k.relkind)).toEqual(['p', 'p', 'p', 'p', 'p']);
    for (const [table, columns, order] of tables) expect(await rowsOf(table, columns, order)).toEqual(expect.arrayContaining(snapshot[table]!));
    expect(Number((await pool.query<{ n: string }>('select count(*) n from entregas_default')).rows[0]!.n)).toBe(0);
  }, 30_000);
});
