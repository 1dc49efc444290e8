import { sql, type RawBuilder } from 'kysely';
import type { DeliveryState, EventName } from '@svc/contracts';
import { prepared, type Db, type Transaction } from '../database';
import { countPartition, dropPartitions, lockTables, partitionName, partitionRange, withinRange, withLockRetries } from '../partitions';
import { insertDeliveryAttempts, type DeliveryAttempt } from './delivery-attempts.table';
import { keepEventsResendsName, outboxDayOwed } from './outbox.table';

/**
 * The one writer of deliveries (`entregas`): the dispatcher's rows of a fan-out, the attempts made
 * on them, their claims, postponements and retention (whole days dropped); the gateway's PINGs and resends. Each
 * statement that makes or removes attempts takes the delivery log's part from
 * delivery-attempts.table.ts. Reads stay with each service's own repository.
 */

// ---- the dispatcher's deliveries -------------------------------------------------------------------

/**
 * A delivery the fan-out creates once its first attempt has been made (or deferred): the row is
 * written with where the delivery then stands, so a successful first attempt costs one insert and
 * no update (an update would leave a dead row and a second set of index entries per delivery).
 */
export interface NewDelivery {
  /** Name-based from (event, webhook): a run that sent and crashed before this row sends again under the same id. */
  id: string;
  webhookId: string;
  eventId: string;
  event: EventName;
  /** Null for a notice (no shipment). */
  numeroGuia: string | null;
  /** The first attempt; null when it waits for its webhook's turn (deferred). */
  attempt: AttemptRecord | null;
  /** When the next attempt is due: a retry's or a deferred first attempt's time; null once ended. */
  nextAt: Date | null;
}

/**
 * Inserts new deliveries with their first attempt in the delivery log, in one statement that also
 * runs `fannedOut` (the fan-out marks its events fanned out there: `markFannedOut`, which returns
 * each event's id and created_at); returns the ids inserted. Each delivery's partition key is its
 * event's creation as `fannedOut` returns it, the same for every run of the event (the statement's
 * time for an event it does not return: a fan-out runs only while its event's row is kept), so a row
 * already there (a duplicate run of the same
 * event, or a row of an earlier version with a random id) conflicts, is left as it is and its
 * attempt is not logged: the caller counts it a duplicate. A delivery whose webhook was deleted
 * meanwhile is not inserted.
 */
export async function insertNewDeliveries(db: Db, rows: readonly NewDelivery[], fannedOut: RawBuilder<{ id: string; created_at: Date }>): Promise<Set<string>> {
  const made = rows.flatMap((r) => (r.attempt === null ? [] : [r.attempt]));
  // Prepared: it runs for every batch of events, with the same text (arrays as parameters).
  const query = sql<{ id: string }>`
    with fanned_out as (${fannedOut}),
    v as (
      select * from unnest(
        ${sql.val(rows.map((r) => r.id))}::uuid[],
        ${sql.val(rows.map((r) => r.webhookId))}::uuid[],
        ${sql.val(rows.map((r) => r.eventId))}::uuid[],
        ${sql.val(rows.map((r) => r.event))}::text[],
        ${sql.val(rows.map((r) => r.numeroGuia))}::text[],
        ${sql.val(rows.map((r) => r.attempt?.state ?? 'pendiente'))}::text[],
        ${sql.val(rows.map((r) => r.attempt?.attempt ?? 0))}::int[],
        ${sql.val(rows.map((r) => r.attempt?.statusCode ?? 0))}::int[],
        ${sql.val(rows.map((r) => r.attempt?.at.toISOString() ?? null))}::timestamptz[],
        ${sql.val(rows.map((r) => r.nextAt?.toISOString() ?? null))}::timestamptz[]
      ) as v(id, webhook_id, evento_id, evento, numero_guia, estado, intentos, status_code, at, next_at)
    ), ins as (
      -- created_at, by which the delivery log is ordered (newest first), is when the first attempt
      -- was made: the statement's own time is one for the whole batch, and the fan-out batches
      -- events a few ms apart (its record waits for company), so a later event's delivery could be
      -- listed after an earlier one's. A deferred delivery, with no attempt yet, takes the statement's,
      -- and is marked diferida: it has no job, the deferral scheduler queues it when due.
      insert into entregas (id, webhook_id, evento_id, evento, numero_guia, estado, exitoso, status_code, intentos, ultimo_intento_en, proximo_intento_en, diferida, created_at, particion_en)
      select v.id, v.webhook_id, v.evento_id, v.evento, v.numero_guia, v.estado, v.estado = 'exitosa', v.status_code, v.intentos, v.at, v.next_at, v.intentos = 0, coalesce(v.at, now()),
        coalesce(f.created_at, now())
      from v
      left join fanned_out f on f.id = v.evento_id
      -- A webhook deleted since the routes were read gets no row (its foreign key would fail the
      -- batch). A lateral that is not flattened: a plain semi-join planned on a few webhooks kept
      -- hashing a sequential scan of them (test/fan-out-plans.test.ts).
      cross join lateral (select 1 from webhooks w where w.id = v.webhook_id offset 0) w
      on conflict do nothing
      returning id, particion_en
    ), logged as (${insertDeliveryAttempts(made, 'ins')})
    select id from ins
  `;
  const result = await db.executeQuery<{ id: string }>(prepared('insert_new_deliveries', query, db));
  return new Set(result.rows.map((r) => r.id));
}

/** A made attempt, for the delivery log, and where its delivery then stands. */
export interface AttemptRecord extends DeliveryAttempt {
  /** `pendiente` while retries remain, `exitosa` on a 2xx, `fallida` after the last attempt. */
  state: DeliveryState;
  /** When the next attempt is due (`pendiente` only). */
  nextAt: Date | null;
  /** The delivery's partition key, as its job carries it (`DeliveryJob.partitionAt`); absent: unknown. */
  partitionAt?: string | undefined;
}

/**
 * Records a batch of attempts in one statement: each delivery's state and, in the delivery log,
 * the attempt with its reason. Only a pending row whose attempt this is changes, so
 * a duplicate run (a stalled job picked up twice, a re-queue racing the original) cannot overwrite
 * an outcome or count an attempt twice: `intentos` takes the attempt's number. Returns the ids
 * that changed.
 */
export async function recordAttempts(db: Db, attempts: readonly AttemptRecord[]): Promise<Set<string>> {
  if (attempts.length === 0) return new Set();
  // Their days only: the prepared statement prunes the other partitions as it starts.
  const days = withinRange('e.particion_en', partitionRange(attempts.map((a) => a.partitionAt)));
  // Prepared: it runs for every batch of attempts, with the same text (arrays as parameters).
  const query = sql<{ id: string }>`
    with v as (
      select * from unnest(
        ${sql.val(attempts.map((a) => a.deliveryId))}::uuid[],
        ${sql.val(attempts.map((a) => a.attempt))}::int[],
        ${sql.val(attempts.map((a) => a.statusCode))}::int[],
        ${sql.val(attempts.map((a) => a.at.toISOString()))}::timestamptz[],
        ${sql.val(attempts.map((a) => a.state))}::text[],
        ${sql.val(attempts.map((a) => a.nextAt?.toISOString() ?? null))}::timestamptz[]
      ) as v(id, intento, status_code, at, estado, next_at)
    ), changed as (
      update entregas as e set
        intentos = v.intento,
        status_code = v.status_code,
        ultimo_intento_en = v.at,
        estado = v.estado,
        exitoso = (v.estado = 'exitosa'),
        proximo_intento_en = v.next_at
      from v
      where e.id = v.id and e.estado = 'pendiente' and e.intentos < v.intento and ${days}
      returning e.id, e.particion_en
    ), logged as (${insertDeliveryAttempts(attempts, 'changed')})
    select id from changed
  `;
  const result = await db.executeQuery<{ id: string }>(prepared('record_attempts', query, db));
  return new Set(result.rows.map((r) => r.id));
}

/** Ends a pending delivery as failed without an attempt (its webhook was deactivated meanwhile, or its event row is gone). */
export async function abandonDelivery(db: Db, id: string, partitionAt?: string): Promise<boolean> {
  const row = await db
    .updateTable('entregas')
    .set({ estado: 'fallida', exitoso: false, proximo_intento_en: null })
    .where('id', '=', id)
    .where(withinRange('particion_en', partitionRange([partitionAt])))
    .where('estado', '=', 'pendiente')
    .returning('id')
    .executeTakeFirst();
  return row !== undefined;
}

/**
 * Ends every pending delivery of the given webhooks (closed listening sessions): no retry of theirs
 * is owed any more, so neither the reconciler nor the deferral scheduler queues one again. Returns
 * how many it ended.
 */
export async function abandonDeliveriesOf(db: Db, webhookIds: readonly string[]): Promise<number> {
  if (webhookIds.length === 0) return 0;
  const result = await db
    .updateTable('entregas')
    .set({ estado: 'fallida', exitoso: false, proximo_intento_en: null })
    .where('webhook_id', '=', sql<string>`any(${sql.val([...webhookIds])}::uuid[])`)
    .where('estado', '=', 'pendiente')
    .executeTakeFirst();
  return Number(result.numUpdatedRows);
}

export interface OverdueDelivery {
  deliveryId: string;
  webhookId: string;
  /** The event's id; for the resend of a PING, the PING's id (no event row). */
  eventId: string;
  event: EventName;
  /** The number of its next attempt. */
  attempt: number;
  /** For a resend, when it was made (its job's `committedAt`); null for an event's own delivery. */
  resentAt: Date | null;
  /** The delivery's partition key (its job's `partitionAt`). */
  partitionAt: Date;
}

/**
 * Claims pending deliveries whose next attempt is more than `graceMs` overdue, oldest first: their
 * due time moves `graceMs` ahead, so that other reconcilers (and this one's next pass) leave them
 * alone while their work is queued again. Rows locked by someone else are skipped.
 */
export function claimOverdue(db: Db, graceMs: number, limit: number): Promise<OverdueDelivery[]> {
  const grace = sql`make_interval(secs => ${graceMs / 1000})`;
  return claimDue(db, sql`proximo_intento_en = now() + ${grace}`, sql`proximo_intento_en < now() - ${grace}`, limit);
}

/**
 * The claim both passes make: up to `limit` pending deliveries matching `due`, oldest due first,
 * changed by `set` so no other dispatcher claims them; rows another holds are skipped.
 */
async function claimDue(db: Db, set: RawBuilder<unknown>, due: RawBuilder<unknown>, limit: number): Promise<OverdueDelivery[]> {
  const result = await sql<OverdueRow>`
    update entregas set ${set}
    where id in (
      select id from entregas
      where estado = 'pendiente' and ${due} and evento_id is not null
      order by proximo_intento_en
      limit ${limit}
      for update skip locked
    )
    returning id, webhook_id, evento_id, evento, intentos, es_reenvio, created_at, particion_en
  `.execute(db);
  return result.rows.map(overdueOf);
}

interface OverdueRow {
  id: string;
  webhook_id: string;
  evento_id: string;
  evento: EventName;
  intentos: number;
  es_reenvio: boolean;
  created_at: Date;
  particion_en: Date;
}

const overdueOf = (r: OverdueRow): OverdueDelivery => ({
  deliveryId: r.id,
  webhookId: r.webhook_id,
  eventId: r.evento_id,
  event: r.evento,
  attempt: r.intentos + 1,
  resentAt: r.es_reenvio ? r.created_at : null,
  partitionAt: r.particion_en,
});

/**
 * Claims up to `limit` deferred deliveries now due, oldest first, clearing their mark: from here
 * their jobs are Redis's work, and if Redis loses them the reconciler queues them once overdue.
 * Rows locked by another dispatcher's scheduler are skipped.
 */
export function claimDeferred(db: Db, limit: number): Promise<OverdueDelivery[]> {
  return claimDue(db, sql`diferida = false`, sql`diferida and proximo_intento_en <= now()`, limit);
}

export interface Postponement {
  id: string;
  /** The attempt that waits for its webhook's turn. */
  attempt: number;
  /** When it comes back. */
  at: Date;
  /** The delivery's partition key, as its job carries it; absent: unknown. */
  partitionAt?: string | undefined;
}

/**
 * Moves the due time of pending deliveries whose next attempt waits for its webhook's turn, in one
 * statement, and marks them deferred: their jobs end, and the deferral scheduler queues them again
 * once due. The record keeps saying when the attempt is owed, so the reconciler and the overdue
 * gauge count a delivery late only once that time has passed. An attempt already made meanwhile
 * (a duplicate run) leaves its row alone.
 */
export async function postponeDeliveries(db: Db, postponed: readonly Postponement[]): Promise<void> {
  if (postponed.length === 0) return;
  const days = withinRange('e.particion_en', partitionRange(postponed.map((p) => p.partitionAt)));
  await sql`
    update entregas as e set proximo_intento_en = v.at, diferida = true
    from unnest(
      ${sql.val(postponed.map((p) => p.id))}::uuid[],
      ${sql.val(postponed.map((p) => p.attempt))}::int[],
      ${sql.val(postponed.map((p) => p.at.toISOString()))}::timestamptz[]
    ) as v(id, intento, at)
    where e.id = v.id and e.estado = 'pendiente' and e.intentos = v.intento - 1 and ${days}
  `.execute(db);
}

/** The tables of one day of deliveries, dropped together. */
export type DeliveryDayTable = 'entregas' | 'entrega_intentos' | 'outbox';

/** What retiring a day did: dropped it (with the rows each table held), or left it and why. */
export type RetiredDay =
  | { dropped: true; rows: Record<DeliveryDayTable, number> }
  /**
   * `owed`: a pending delivery of the day, or an event of the day not yet relayed or fanned out, or
   * that a pending delivery (a resend) still sends: work, kept whatever its age, so the day waits.
   * `locked`: its partitions were busy past the lock timeout; the next pass tries again.
   */
  | { dropped: false; reason: 'owed' | 'locked' };

const tableOfDay = (table: DeliveryDayTable, day: Date) => sql.table(partitionName(table, day));

/**
 * Retention of one UTC day of deliveries: drops that day's partitions of `entregas`,
 * `entrega_intentos` and `outbox` at once (an event's own deliveries and their attempts are in its
 * day's partitions), unless the day still holds owed work. In one transaction that first takes the
 * three tables and the day's partitions for itself (`lockTables`), so what it checks holds until
 * the drop: nothing can be written to or read from them meanwhile (a few milliseconds), and it gives
 * up after PARTITION_LOCK_TIMEOUT_MS rather than stall the tables, DROP_ATTEMPTS times. Before the drop, the resends kept in later days keep what they name: the events they send
 * move to the day of their oldest such resend (outbox.table.ts), and a resend of a delivery of the
 * day loses its `reenvio_de`, as a removed original always set it to null.
 */
export async function retireDeliveryDay(db: Db, day: Date): Promise<RetiredDay> {
  const tables: DeliveryDayTable[] = ['outbox', 'entregas', 'entrega_intentos'];
  const exists = await sql<{ t: string | null }>`
    select to_regclass(t)::text as t from unnest(${sql.val(tables.map((t) => partitionName(t, day)))}::text[]) t`.execute(db);
  const present = new Set(exists.rows.flatMap((r) => (r.t === null ? [] : [r.t])));
  const has = (t: DeliveryDayTable) => present.has(partitionName(t, day));
  // Counted before the locks: an old day's rows no longer change, and a count holds no one up.
  const rows: Record<DeliveryDayTable, number> = { outbox: 0, entregas: 0, entrega_intentos: 0 };
  for (const t of tables) if (has(t)) rows[t] = await countPartition(db, partitionName(t, day));
  const owned = tables.filter(has).map((t) => partitionName(t, day));
  const result = await withLockRetries(() =>
    db.transaction().execute(async (trx): Promise<RetiredDay> => {
      await lockTables(trx, [...tables, ...owned]);
      if (has('entregas') && (await dayHasPending(trx, day))) return { dropped: false, reason: 'owed' };
      let moved = 0;
      if (has('outbox')) {
        if (await outboxDayOwed(trx, tableOfDay('outbox', day))) return { dropped: false, reason: 'owed' };
        moved = await keepEventsResendsName(trx, day);
      }
      if (has('entregas')) await forgetOriginals(trx, day);
      await dropPartitions(trx, owned);
      return { dropped: true, rows: { ...rows, outbox: rows.outbox - moved } };
    }),
  );
  return result ?? { dropped: false, reason: 'locked' };
}

async function dayHasPending(trx: Transaction, day: Date): Promise<boolean> {
  const { rows } = await sql`select 1 from ${tableOfDay('entregas', day)} where estado = 'pendiente' limit 1`.execute(trx);
  return rows.length > 0;
}

/** Resends kept in later days whose original is of `day` lose their `reenvio_de` (the original goes). */
async function forgetOriginals(trx: Transaction, day: Date): Promise<void> {
  await sql`
    update entregas r set reenvio_de = null
    from ${tableOfDay('entregas', day)} o
    where r.reenvio_de = o.id and r.reenvio_de is not null and r.particion_en >= ${new Date(day.getTime() + 86_400_000)}`.execute(trx);
}

// ---- the gateway's deliveries ----------------------------------------------------------------------

/**
 * Records a PING (the test operation): one delivery, already final, and its one attempt, in one
 * statement. It is created when its attempt began, not when the attempt (up to 5 s) ended.
 */
export async function insertPingDelivery(
  db: Db,
  ping: { id: string; webhookId: string; ok: boolean; attempt: Omit<DeliveryAttempt, 'deliveryId' | 'attempt'> },
): Promise<void> {
  const a = { ...ping.attempt, deliveryId: ping.id, attempt: 1 };
  await sql`
    with delivery as (
      insert into entregas (id, webhook_id, evento_id, evento, estado, exitoso, status_code, intentos, ultimo_intento_en, created_at)
      values (${ping.id}, ${ping.webhookId}, null, 'PING', ${ping.ok ? 'exitosa' : 'fallida'}, ${ping.ok}, ${a.statusCode}, 1, ${a.at}, ${a.at})
      returning id, particion_en
    )
    ${insertDeliveryAttempts([a], 'delivery')}
  `.execute(db);
}

/**
 * The insert of resends inside the statement that picks their originals: a new delivery per row of
 * `picked` (a relation of the same statement with an original's id, webhook_id, evento_id, evento
 * and numero_guia), sending its event again to the same webhook: the same `evento`, `evento_id` (for
 * a PING, the PING's own id) and shipment, `reenvio_de` = the original, pending and due now (the
 * dispatcher makes its attempts). Returns the delivery log's columns of each resend, `created_at`
 * also as Postgres's text (`at`, to the microsecond).
 */
export function insertResendsOf(picked: string): RawBuilder<unknown> {
  return sql`
    insert into entregas (id, webhook_id, evento_id, evento, numero_guia, reenvio_de, es_reenvio, proximo_intento_en)
    select gen_random_uuid(), webhook_id, coalesce(evento_id, id), evento, numero_guia, id, true, now()
    from ${sql.table(picked)}
    returning id, evento, exitoso, status_code, intentos, ultimo_intento_en, created_at, estado, evento_id, numero_guia, reenvio_de,
      created_at::text as at, particion_en`;
}

/**
 * The insert of the replay of what a webhook missed while it was inactive, inside the statement
 * that picks the events: a new delivery per row of `picked` (a relation with webhook_id, evento_id,
 * evento, numero_guia and event_at, the event's creation), an original of its event, pending and due
 * now. Its partition key is the event's creation, as the fan-out's deliveries' is: the
 * one-delivery-per-(event, webhook) index then holds it to one (a concurrent replay or fan-out makes
 * none twice), and retention drops it with its event's day. Returns the delivery log's columns, as
 * `insertResendsOf` does.
 */
export function insertOmittedOf(picked: string): RawBuilder<unknown> {
  return sql`
    insert into entregas (id, webhook_id, evento_id, evento, numero_guia, proximo_intento_en, particion_en)
    select gen_random_uuid(), webhook_id, evento_id, evento, numero_guia, now(), event_at
    from ${sql.table(picked)}
    on conflict do nothing
    returning id, evento, exitoso, status_code, intentos, ultimo_intento_en, created_at, estado, evento_id, numero_guia, reenvio_de,
      created_at::text as at, particion_en`;
}
