import { sql, type Kysely, type RawBuilder } from 'kysely';
import { createDayPartition, dayOf, PARTITIONS_AHEAD_DAYS, type PartitionedTable } from '../partitions';

/**
 * The tables that grow with traffic, partitioned by day (issue 38; docs/decisions/0009-tables-partitioned-by-day.md),
 * so that retention drops whole days instead of deleting rows. Each table is rebuilt in this one
 * transaction, keeping every row: the old table is set aside, a partitioned parent takes its
 * columns, defaults and checks, a partition is made for every day that holds rows and for today and
 * the week ahead (the upkeep makes the later ones), with a DEFAULT partition for anything else;
 * the rows are copied, the old table dropped, and the keys, indexes, foreign keys and triggers made
 * again on the parent (which makes them on every partition).
 *
 * What changes, because a partitioned table's keys must hold its partition key:
 * - `entregas` is partitioned on a new `particion_en`: its event's creation for an event's own
 *   delivery (every run of a fan-out writes the same key, so the same id still conflicts), its own
 *   creation for a PING or a resend. Primary key (id, particion_en); the one-delivery-per-(event,
 *   webhook) index holds particion_en too. `reenvio_de` loses its self-reference (a dropped day
 *   cannot set it null; the retention does, see deliveries.table.ts).
 * - `entrega_intentos` carries its delivery's `particion_en` and is partitioned on it, so a day's
 *   attempts go with that day's deliveries. Its foreign key to `entregas` goes (a foreign key to a
 *   partitioned table makes every drop of a day check the attempts); an attempt is written only by
 *   the statement that writes its delivery, and goes with its delivery's day. (No route deletes a
 *   webhook; were one deleted by hand, the cascade to its deliveries would leave their attempts,
 *   read by no one, until their day is dropped. A trigger cannot remove them: a row moved between
 *   partitions fires the delete triggers too.)
 * - `outbox`, `actividad`, `idempotencia` on `created_at`: primary keys (id, created_at) and
 *   (scope, clave, created_at). A key's uniqueness within its lifetime is the gateway's lock
 *   (idempotency.repository.ts).
 * - The indexes only the batched deletes walked (`*_created_idx`) go; the append-only trigger of
 *   `actividad` no longer lets the retention's deletes through (only the upkeep's moves).
 *
 * The rows are copied with the locks of this transaction held: on a large database, run it in a
 * quiet hour (docs/operations.md, Retention).
 */

const TABLES: readonly PartitionedTable[] = ['outbox', 'entregas', 'entrega_intentos', 'actividad', 'idempotencia'];

/** The UTC days that `query` (one column `day`) returns, with today and the days ahead. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function daysOf(db: Kysely<any>, query: RawBuilder<{ day: Date }>): Promise<Date[]> {
  const { rows } = await query.execute(db);
  const today = dayOf(new Date());
  const days = new Map<number, Date>();
  for (const r of rows) days.set(dayOf(new Date(r.day)).getTime(), dayOf(new Date(r.day)));
  for (let i = 0; i <= PARTITIONS_AHEAD_DAYS; i++) days.set(today.getTime() + i * 86_400_000, new Date(today.getTime() + i * 86_400_000));
  return [...days.values()].sort((a, b) => a.getTime() - b.getTime());
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  for (const table of TABLES) await sql`alter table ${sql.table(table)} rename to ${sql.table(`${table}_old`)}`.execute(db);

  await sql`create table outbox (like outbox_old including defaults including constraints) partition by range (created_at)`.execute(db);
  await sql`
    create table entregas (like entregas_old including defaults including constraints, particion_en timestamptz not null default clock_timestamp())
    partition by range (particion_en)`.execute(db);
  await sql`create table entrega_intentos (like entrega_intentos_old including defaults including constraints, particion_en timestamptz not null) partition by range (particion_en)`.execute(db);
  await sql`create table actividad (like actividad_old including defaults including constraints including identity) partition by range (created_at)`.execute(db);
  await sql`create table idempotencia (like idempotencia_old including defaults including constraints) partition by range (created_at)`.execute(db);
  for (const table of TABLES) await sql`create table ${sql.table(`${table}_default`)} partition of ${sql.table(table)} default`.execute(db);

  // An event's own delivery takes its event's creation as its key; a PING, a resend, or a delivery
  // whose event is gone, its own.
  await sql`
    create temporary table entregas_keys on commit drop as
    select e.id, coalesce(o.created_at, e.created_at) as particion_en
    from entregas_old e left join outbox_old o on o.id = e.evento_id and not e.es_reenvio`.execute(db);
  const byDay = (table: string, key: string) => sql<{ day: Date }>`select distinct date_trunc('day', ${sql.ref(key)}, 'UTC') as day from ${sql.table(table)}`;
  const days: Record<PartitionedTable, Date[]> = {
    outbox: await daysOf(db, byDay('outbox_old', 'created_at')),
    entregas: await daysOf(db, byDay('entregas_keys', 'particion_en')),
    entrega_intentos: await daysOf(db, byDay('entregas_keys', 'particion_en')),
    actividad: await daysOf(db, byDay('actividad_old', 'created_at')),
    idempotencia: await daysOf(db, byDay('idempotencia_old', 'created_at')),
  };
  for (const table of TABLES) for (const day of days[table]) await createDayPartition(db, table, day);

  await sql`insert into outbox select * from outbox_old`.execute(db);
  await sql`insert into entregas select e.*, k.particion_en from entregas_old e join entregas_keys k using (id)`.execute(db);
  await sql`insert into entrega_intentos select i.*, k.particion_en from entrega_intentos_old i join entregas_keys k on k.id = i.entrega_id`.execute(db);
  await sql`insert into actividad overriding system value select * from actividad_old`.execute(db);
  const last = await sql<{ id: string | null }>`select max(id)::text as id from actividad_old`.execute(db);
  await sql`alter table actividad alter column id restart with ${sql.lit(Number(last.rows[0]?.id ?? 0) + 1)}`.execute(db);
  await sql`insert into idempotencia select * from idempotencia_old`.execute(db);
  await sql`drop table entrega_intentos_old, entregas_old, outbox_old, actividad_old, idempotencia_old`.execute(db);

  await sql`alter table outbox add constraint outbox_pkey primary key (id, created_at)`.execute(db);
  await sql`create index outbox_pendientes_idx on outbox (created_at) where enviado_en is null`.execute(db);
  await sql`create index outbox_sin_repartir_idx on outbox (created_at) where repartido_en is null`.execute(db);

  await sql`alter table entregas add constraint entregas_pkey primary key (id, particion_en)`.execute(db);
  await sql`alter table entregas add constraint entregas_webhook_id_fkey foreign key (webhook_id) references webhooks (id) on delete cascade`.execute(db);
  await sql`create index entregas_webhook_idx on entregas (webhook_id, created_at desc, id desc)`.execute(db);
  await sql`create unique index entregas_evento_webhook_uq on entregas (evento_id, webhook_id, particion_en) where evento_id is not null and not es_reenvio`.execute(db);
  await sql`create index entregas_vencidas_idx on entregas (proximo_intento_en) where estado = 'pendiente'`.execute(db);
  await sql`create index entregas_diferidas_idx on entregas (proximo_intento_en) where estado = 'pendiente' and diferida`.execute(db);
  await sql`create index entregas_reenvio_de_idx on entregas (reenvio_de) where reenvio_de is not null`.execute(db);
  await sql`create index entregas_reenvio_evento_idx on entregas (evento_id) where es_reenvio`.execute(db);
  await sql`create index entregas_webhook_evento_idx on entregas (webhook_id, evento, created_at desc, id desc)`.execute(db);
  await sql`create index entregas_webhook_estado_idx on entregas (webhook_id, estado, created_at desc, id desc) where estado <> 'exitosa'`.execute(db);
  await sql`create index entregas_webhook_sin_exito_idx on entregas (webhook_id, created_at desc, id desc) where not exitoso`.execute(db);

  await sql`alter table entrega_intentos add constraint entrega_intentos_pk primary key (entrega_id, numero, particion_en)`.execute(db);
  await sql`alter table actividad add constraint actividad_pkey primary key (id, created_at)`.execute(db);
  await sql`alter table actividad add constraint actividad_empresa_id_fkey foreign key (empresa_id) references empresas (id)`.execute(db);
  await sql`create index actividad_empresa_idx on actividad (empresa_id, id desc)`.execute(db);
  // Retention drops whole days now: no entry is ever deleted. The one delete let through is the
  // upkeep's move of entries the DEFAULT partition took into their day's new partition (the same
  // rows, inserted in the same statement; db/partitions.ts says so in its own transaction).
  await sql`
    create or replace function actividad_append_only() returns trigger language plpgsql as $$
    begin
      if tg_op = 'DELETE' and tg_table_name = 'actividad_default' and current_setting('svc.partition_move', true) = 'on' then
        return old;
      end if;
      raise exception 'actividad is append-only: % refused', tg_op using errcode = 'raise_exception';
    end
    $$`.execute(db);
  await sql`create trigger actividad_append_only_trg before update or delete on actividad for each row execute function actividad_append_only()`.execute(db);
  await sql`create trigger actividad_no_truncate_trg before truncate on actividad for each statement execute function actividad_append_only()`.execute(db);

  await sql`alter table idempotencia add constraint idempotencia_pk primary key (scope, clave, created_at)`.execute(db);
}

/** Plain tables again, as of 20261129090000_deferred_deliveries, every row kept. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  for (const table of TABLES) {
    const identity = table === 'actividad' ? sql`including identity` : sql``;
    await sql`create table ${sql.table(`${table}_plain`)} (like ${sql.table(table)} including defaults including constraints ${identity})`.execute(db);
  }
  await sql`insert into outbox_plain select * from outbox`.execute(db);
  await sql`alter table entregas_plain drop column particion_en`.execute(db);
  await sql`alter table entrega_intentos_plain drop column particion_en`.execute(db);
  await sql`
    insert into entregas_plain select distinct on (id) id, webhook_id, evento_id, evento, estado, exitoso, status_code, intentos, ultimo_intento_en, created_at,
      proximo_intento_en, numero_guia, reenvio_de, es_reenvio, diferida
    from entregas order by id, particion_en`.execute(db);
  await sql`
    insert into entrega_intentos_plain select distinct on (entrega_id, numero) entrega_id, numero, fecha, status_code, duracion_ms, error, mensaje, respuesta
    from entrega_intentos order by entrega_id, numero, particion_en`.execute(db);
  await sql`insert into actividad_plain overriding system value select * from actividad`.execute(db);
  const last = await sql<{ id: string | null }>`select max(id)::text as id from actividad`.execute(db);
  await sql`alter table actividad_plain alter column id restart with ${sql.lit(Number(last.rows[0]?.id ?? 0) + 1)}`.execute(db);
  await sql`insert into idempotencia_plain select distinct on (scope, clave) * from idempotencia order by scope, clave, created_at desc`.execute(db);
  for (const table of TABLES) {
    await sql`drop table ${sql.table(table)}`.execute(db);
    await sql`alter table ${sql.table(`${table}_plain`)} rename to ${sql.table(table)}`.execute(db);
  }

  await sql`alter table outbox add primary key (id)`.execute(db);
  await sql`create index outbox_pendientes_idx on outbox (created_at) where enviado_en is null`.execute(db);
  await sql`create index outbox_sin_repartir_idx on outbox (created_at) where repartido_en is null`.execute(db);
  await sql`create index outbox_created_idx on outbox (created_at, id)`.execute(db);

  await sql`alter table entregas add primary key (id)`.execute(db);
  await sql`update entregas e set reenvio_de = null where reenvio_de is not null and not exists (select 1 from entregas o where o.id = e.reenvio_de)`.execute(db);
  await sql`
    alter table entregas
      add constraint entregas_webhook_id_fkey foreign key (webhook_id) references webhooks (id) on delete cascade,
      add constraint entregas_reenvio_de_fkey foreign key (reenvio_de) references entregas (id) on delete set null`.execute(db);
  await sql`create index entregas_webhook_idx on entregas (webhook_id, created_at desc, id desc)`.execute(db);
  await sql`create unique index entregas_evento_webhook_uq on entregas (evento_id, webhook_id) where evento_id is not null and not es_reenvio`.execute(db);
  await sql`create index entregas_vencidas_idx on entregas (proximo_intento_en) where estado = 'pendiente'`.execute(db);
  await sql`create index entregas_diferidas_idx on entregas (proximo_intento_en) where estado = 'pendiente' and diferida`.execute(db);
  await sql`create index entregas_reenvio_de_idx on entregas (reenvio_de) where reenvio_de is not null`.execute(db);
  await sql`create index entregas_reenvio_evento_idx on entregas (evento_id) where es_reenvio`.execute(db);
  await sql`create index entregas_created_idx on entregas (created_at, id)`.execute(db);
  await sql`create index entregas_webhook_evento_idx on entregas (webhook_id, evento, created_at desc, id desc)`.execute(db);
  await sql`create index entregas_webhook_estado_idx on entregas (webhook_id, estado, created_at desc, id desc) where estado <> 'exitosa'`.execute(db);
  await sql`create index entregas_webhook_sin_exito_idx on entregas (webhook_id, created_at desc, id desc) where not exitoso`.execute(db);

  await sql`delete from entrega_intentos i where not exists (select 1 from entregas e where e.id = i.entrega_id)`.execute(db);
  await sql`
    alter table entrega_intentos
      add constraint entrega_intentos_pk primary key (entrega_id, numero),
      add constraint entrega_intentos_entrega_id_fkey foreign key (entrega_id) references entregas (id) on delete cascade`.execute(db);

  await sql`alter table actividad add primary key (id)`.execute(db);
  await sql`alter table actividad add constraint actividad_empresa_id_fkey foreign key (empresa_id) references empresas (id)`.execute(db);
  await sql`create index actividad_empresa_idx on actividad (empresa_id, id desc)`.execute(db);
  await sql`create index actividad_created_idx on actividad (created_at)`.execute(db);
  await sql`
    create or replace function actividad_append_only() returns trigger language plpgsql as $$
    begin
      if tg_op = 'DELETE' and current_setting('svc.actividad_retention', true) = 'on' then
        return old;
      end if;
      raise exception 'actividad is append-only: % refused', tg_op using errcode = 'raise_exception';
    end
    $$`.execute(db);
  await sql`create trigger actividad_append_only_trg before update or delete on actividad for each row execute function actividad_append_only()`.execute(db);
  await sql`create trigger actividad_no_truncate_trg before truncate on actividad for each statement execute function actividad_append_only()`.execute(db);

  await sql`alter table idempotencia add constraint idempotencia_pk primary key (scope, clave)`.execute(db);
  await sql`create index idempotencia_created_idx on idempotencia (created_at)`.execute(db);
}
