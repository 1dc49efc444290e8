import type { DeletedBatch } from '../batched-delete';
import { sql, type RawBuilder } from 'kysely';
import type { DeliveryState, EventName } from '@svc/contracts';
import { prepared, type Db } from '../database';
import { nextRemovalCursor, removalCandidates, type LastCandidate, type RemovalCursor } from '../removal-cursor';
import { deleteDeliveryAttempts, insertDeliveryAttempts, type DeliveryAttempt } from './delivery-attempts.table';

/**
 * The one writer of deliveries (`entregas`): the dispatcher's rows of a fan-out, the attempts made
 * on them, their claims, postponements and retention; the gateway's PINGs and resends. Each
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
 * runs `alongside` (the fan-out marks its events fanned out there); returns the ids inserted. A row
 * already there (a duplicate run of the same event, or a row of an earlier version with a random
 * id) is left as it is and its attempt is not logged: the caller counts it a duplicate. A delivery
 * whose webhook was deleted meanwhile is not inserted.
 */
export async function insertNewDeliveries(db: Db, rows: readonly NewDelivery[], alongside: RawBuilder<unknown>): Promise<Set<string>> {
  const made = rows.flatMap((r) => (r.attempt === null ? [] : [r.attempt]));
  // Prepared: it runs for every batch of events, with the same text (arrays as parameters).
  const query = sql<{ id: string }>`
    with alongside as (${alongside}),
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
      insert into entregas (id, webhook_id, evento_id, evento, numero_guia, estado, exitoso, status_code, intentos, ultimo_intento_en, proximo_intento_en, diferida, created_at)
      select v.id, v.webhook_id, v.evento_id, v.evento, v.numero_guia, v.estado, v.estado = 'exitosa', v.status_code, v.intentos, v.at, v.next_at, v.intentos = 0, coalesce(v.at, now())
      from v
      -- A webhook deleted since the routes were read gets no row (its foreign key would fail the
      -- batch). A lateral that is not flattened: a plain semi-join planned on a few webhooks kept
      -- hashing a sequential scan of them (test/fan-out-plans.test.ts).
      cross join lateral (select 1 from webhooks w where w.id = v.webhook_id offset 0) w
      on conflict do nothing
      returning id
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
      where e.id = v.id and e.estado = 'pendiente' and e.intentos < v.intento
      returning e.id
    ), logged as (${insertDeliveryAttempts(attempts, 'changed')})
    select id from changed
  `;
  const result = await db.executeQuery<{ id: string }>(prepared('record_attempts', query, db));
  return new Set(result.rows.map((r) => r.id));
}

/** Ends a pending delivery as failed without an attempt (its webhook was deactivated meanwhile, or its event row is gone). */
export async function abandonDelivery(db: Db, id: string): Promise<boolean> {
  const row = await db
    .updateTable('entregas')
    .set({ estado: 'fallida', exitoso: false, proximo_intento_en: null })
    .where('id', '=', id)
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
    returning id, webhook_id, evento_id, evento, intentos, es_reenvio, created_at
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
}

const overdueOf = (r: OverdueRow): OverdueDelivery => ({
  deliveryId: r.id,
  webhookId: r.webhook_id,
  eventId: r.evento_id,
  event: r.evento,
  attempt: r.intentos + 1,
  resentAt: r.es_reenvio ? r.created_at : null,
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
  await sql`
    update entregas as e set proximo_intento_en = v.at, diferida = true
    from unnest(
      ${sql.val(postponed.map((p) => p.id))}::uuid[],
      ${sql.val(postponed.map((p) => p.attempt))}::int[],
      ${sql.val(postponed.map((p) => p.at.toISOString()))}::timestamptz[]
    ) as v(id, intento, at)
    where e.id = v.id and e.estado = 'pendiente' and e.intentos = v.intento - 1
  `.execute(db);
}

export interface RemovedDeliveries extends DeletedBatch<RemovalCursor> {
  deliveries: number;
  attempts: number;
}

/**
 * Retention: looks at the next `limit` deliveries after `after` created more than `retentionDays`
 * ago, along `entregas_created_idx` (a keyset walk: what earlier batches removed or left is not
 * scanned again), and removes the ended ones (exitosa, fallida) with their attempts, in one short
 * statement. A pending delivery is owed work and stays whatever its age; a row another transaction
 * holds (a concurrent resend's foreign-key check, another dispatcher's removal) is skipped, not
 * waited for: the next pass sees both again. A resend of a removed delivery stays: its
 * `reenvio_de` is set to null (`on delete set null`), `es_reenvio` still says what it is.
 * The candidates are materialized first so the plan is always this index walk, whatever the
 * table's statistics say after a large removal.
 */
export async function removeEndedDeliveries(db: Db, retentionDays: number, after: RemovalCursor, limit: number): Promise<RemovedDeliveries> {
  const result = await sql<LastCandidate & { entregas: string; intentos: string; seen: string }>`
    with candidates as materialized (${removalCandidates('entregas', retentionDays, after, limit)}
    ),
    doomed as (
      select e.id from entregas e join candidates c on c.id = e.id
      where e.estado <> 'pendiente'
      for update of e skip locked
    ),
    intentos as (${deleteDeliveryAttempts('doomed')}),
    gone as (delete from entregas e using doomed d where e.id = d.id returning 1),
    last as (select created_at::text as at, id::text as id from candidates order by created_at desc, id desc limit 1)
    select (select count(*) from gone) as entregas, (select count(*) from intentos) as intentos,
           (select count(*) from candidates) as seen, (select at from last) as last_at, (select id from last) as last_id
  `.execute(db);
  const row = result.rows[0]!;
  return {
    deliveries: Number(row.entregas),
    attempts: Number(row.intentos),
    seen: Number(row.seen),
    next: nextRemovalCursor(row, after),
  };
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
      returning id
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
      created_at::text as at`;
}

/**
 * The insert of the replay of what a webhook missed while it was inactive, inside the statement
 * that picks the events: a new delivery per row of `picked` (a relation with webhook_id, evento_id,
 * evento and numero_guia), an original of its event (the one-delivery-per-(event, webhook) index
 * holds it to one, so a concurrent replay or fan-out makes none twice), pending and due now. Returns
 * the delivery log's columns, as `insertResendsOf` does.
 */
export function insertOmittedOf(picked: string): RawBuilder<unknown> {
  return sql`
    insert into entregas (id, webhook_id, evento_id, evento, numero_guia, proximo_intento_en)
    select gen_random_uuid(), webhook_id, evento_id, evento, numero_guia, now()
    from ${sql.table(picked)}
    on conflict do nothing
    returning id, evento, exitoso, status_code, intentos, ultimo_intento_en, created_at, estado, evento_id, numero_guia, reenvio_de,
      created_at::text as at`;
}
