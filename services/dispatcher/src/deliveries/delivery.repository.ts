import { sql, type RawBuilder } from 'kysely';
import { prepared, type AttemptErrorClass, type Db, type DeliveryState, type EventName } from '@svc/schema';

/**
 * The dispatcher's side of deliveries (`entregas`): the rows a fan-out creates, and the attempts
 * made on them. The gateway records PINGs and reads deliveries for its API.
 */

export interface PendingDelivery {
  deliveryId: string;
  eventId: string;
  webhookId: string;
  /** The number of its next attempt. */
  attempt: number;
  /** Created by this very statement (not found from an earlier run). */
  fresh: boolean;
}

/**
 * One delivery per routed (event, webhook) pair (`routed`: rows of event_id, evento, numero_guia,
 * webhook_id), due `dueInMs` from now, in one statement that also runs `alongside` (the fan-out marks its events there);
 * returns every one of them still pending. A second run of the same fan-out (a stalled job, or
 * the reconciler's re-queue) meets the unique (evento_id, webhook_id) index of original deliveries
 * (resends share their original's event, and are left out of it) and inserts nothing:
 * the rows of the first run come back from the snapshot the statement started with, so their jobs
 * are queued again under the same job ids (a no-op in Redis when they are still there).
 */
export async function insertDeliveries(
  db: Db,
  routed: RawBuilder<unknown>,
  alongside: RawBuilder<unknown>,
  /** A new row is due this much later than now: the time its first attempt, made at once, has. */
  dueInMs: number,
): Promise<PendingDelivery[]> {
  // Prepared: it runs for every batch of events, with the same text (arrays as parameters).
  type Row = { id: string; evento_id: string; webhook_id: string; intentos: number; fresh: boolean };
  const query = sql<Row>`
    with routed as (${routed}),
    alongside as (${alongside}),
    ins as (
      insert into entregas (id, webhook_id, evento_id, evento, numero_guia, proximo_intento_en)
      select gen_random_uuid(), webhook_id, event_id, evento, numero_guia, now() + make_interval(secs => ${dueInMs / 1000}) from routed
      on conflict (evento_id, webhook_id) where evento_id is not null and not es_reenvio do nothing
      returning id, evento_id, webhook_id, intentos
    )
    select id, evento_id, webhook_id, intentos, true as fresh from ins
    union all
    select e.id, e.evento_id, e.webhook_id, e.intentos, false as fresh
    from entregas e join routed r on e.evento_id = r.event_id and e.webhook_id = r.webhook_id
    where e.estado = 'pendiente' and not e.es_reenvio
  `;
  const result = await db.executeQuery<Row>(prepared('fan_out', query, db));
  return result.rows.map((r) => ({ deliveryId: r.id, eventId: r.evento_id, webhookId: r.webhook_id, attempt: r.intentos + 1, fresh: r.fresh }));
}

export interface DeliveryProgress {
  estado: DeliveryState;
  /** Attempts made so far. */
  intentos: number;
}

/** Where each delivery of a batch stands, in one query; unknown ids are simply absent. */
export async function findDeliveryProgress(db: Db, ids: readonly string[]): Promise<Map<string, DeliveryProgress>> {
  if (ids.length === 0) return new Map();
  const rows = await db
    .selectFrom('entregas')
    .select(['id', 'estado', 'intentos'])
    .where('id', '=', sql<string>`any(${sql.val([...ids])}::uuid[])`)
    .execute();
  return new Map(rows.map((r) => [r.id, { estado: r.estado, intentos: r.intentos }]));
}

export interface AttemptRecord {
  id: string;
  /** 1-based number of this attempt. */
  attempt: number;
  /** 0 when no HTTP status came back. */
  statusCode: number;
  at: Date;
  /** `pendiente` while retries remain, `exitosa` on a 2xx, `fallida` after the last attempt. */
  estado: DeliveryState;
  /** When the next attempt is due (`pendiente` only). */
  nextAt: Date | null;
  durationMs: number;
  /** Why it failed (null for a success), in the delivery log's words. */
  error: AttemptErrorClass | null;
  message: string | null;
  /** The start of the receiver's answer; null when none came. */
  response: string | null;
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
        ${sql.val(attempts.map((a) => a.id))}::uuid[],
        ${sql.val(attempts.map((a) => a.attempt))}::int[],
        ${sql.val(attempts.map((a) => a.statusCode))}::int[],
        ${sql.val(attempts.map((a) => a.at.toISOString()))}::timestamptz[],
        ${sql.val(attempts.map((a) => a.estado))}::text[],
        ${sql.val(attempts.map((a) => a.nextAt?.toISOString() ?? null))}::timestamptz[],
        ${sql.val(attempts.map((a) => a.durationMs))}::int[],
        ${sql.val(attempts.map((a) => a.error))}::text[],
        ${sql.val(attempts.map((a) => a.message))}::text[],
        ${sql.val(attempts.map((a) => a.response))}::text[]
      ) as v(id, intento, status_code, at, estado, next_at, duracion_ms, error, mensaje, respuesta)
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
    ), logged as (
      insert into entrega_intentos (entrega_id, numero, fecha, status_code, duracion_ms, error, mensaje, respuesta)
      select v.id, v.intento, v.at, v.status_code, v.duracion_ms, v.error, v.mensaje, v.respuesta
      from v join changed using (id)
    )
    select id from changed
  `;
  const result = await db.executeQuery<{ id: string }>(prepared('record_attempts', query, db));
  return new Set(result.rows.map((r) => r.id));
}

/** Ends a pending delivery as failed without an attempt (its webhook was deactivated meanwhile). */
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

export interface OverdueDelivery {
  deliveryId: string;
  webhookId: string;
  /** The event's id; for the resend of a PING, the PING's id (no event row). */
  eventId: string;
  evento: EventName;
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
export async function claimOverdue(db: Db, graceMs: number, limit: number): Promise<OverdueDelivery[]> {
  const grace = sql`make_interval(secs => ${graceMs / 1000})`;
  const result = await sql<{ id: string; webhook_id: string; evento_id: string; evento: EventName; intentos: number; es_reenvio: boolean; created_at: Date }>`
    update entregas set proximo_intento_en = now() + ${grace}
    where id in (
      select id from entregas
      where estado = 'pendiente' and proximo_intento_en < now() - ${grace} and evento_id is not null
      order by proximo_intento_en
      limit ${limit}
      for update skip locked
    )
    returning id, webhook_id, evento_id, evento, intentos, es_reenvio, created_at
  `.execute(db);
  return result.rows.map((r) => ({
    deliveryId: r.id,
    webhookId: r.webhook_id,
    eventId: r.evento_id,
    evento: r.evento,
    attempt: r.intentos + 1,
    resentAt: r.es_reenvio ? r.created_at : null,
  }));
}

/** Age in seconds of the most overdue pending delivery (0 when none is due): a gauge. */
export async function oldestOverdueAge(db: Db): Promise<number> {
  const row = await db
    .selectFrom('entregas')
    .select(sql<string | null>`extract(epoch from now() - min(proximo_intento_en))`.as('age'))
    .where('estado', '=', 'pendiente')
    .where('proximo_intento_en', '<', sql<Date>`now()`)
    .executeTakeFirstOrThrow();
  return row.age === null ? 0 : Math.max(0, Number(row.age));
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
 * statement: the record keeps saying when the attempt is owed, so the reconciler and the overdue
 * gauge count a delivery late only once that time has passed. An attempt already made meanwhile
 * (a duplicate run) leaves its row alone.
 */
export async function postponeDeliveries(db: Db, postponed: readonly Postponement[]): Promise<void> {
  if (postponed.length === 0) return;
  await sql`
    update entregas as e set proximo_intento_en = v.at
    from unnest(
      ${sql.val(postponed.map((p) => p.id))}::uuid[],
      ${sql.val(postponed.map((p) => p.attempt))}::int[],
      ${sql.val(postponed.map((p) => p.at.toISOString()))}::timestamptz[]
    ) as v(id, intento, at)
    where e.id = v.id and e.estado = 'pendiente' and e.intentos = v.intento - 1
  `.execute(db);
}

/**
 * Where a removal pass stands in a `(created_at, id)` index: the last row it looked at. The
 * timestamp is Postgres's text, to the microsecond (a JS Date would round it off).
 */
export interface RemovalCursor {
  at: string;
  id: string;
}

/** Before every row. */
export const REMOVAL_START: RemovalCursor = { at: '-infinity', id: '00000000-0000-0000-0000-000000000000' };

export interface RemovedDeliveries {
  entregas: number;
  intentos: number;
  /** Rows looked at (removed or left); fewer than the limit when the pass has reached the cutoff. */
  seen: number;
  /** Where the next batch starts. */
  next: RemovalCursor;
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
  const result = await sql<{ entregas: string; intentos: string; seen: string; last_at: string | null; last_id: string | null }>`
    with candidates as materialized (
      select id, created_at from entregas
      where created_at < now() - make_interval(days => ${retentionDays})
        and (created_at, id) > (${after.at}::timestamptz, ${after.id}::uuid)
      order by created_at, id
      limit ${limit}
    ),
    doomed as (
      select e.id from entregas e join candidates c on c.id = e.id
      where e.estado <> 'pendiente'
      for update of e skip locked
    ),
    intentos as (delete from entrega_intentos i using doomed d where i.entrega_id = d.id returning 1),
    gone as (delete from entregas e using doomed d where e.id = d.id returning 1),
    last as (select created_at::text as at, id::text as id from candidates order by created_at desc, id desc limit 1)
    select (select count(*) from gone) as entregas, (select count(*) from intentos) as intentos,
           (select count(*) from candidates) as seen, (select at from last) as last_at, (select id from last) as last_id
  `.execute(db);
  const row = result.rows[0]!;
  return {
    entregas: Number(row.entregas),
    intentos: Number(row.intentos),
    seen: Number(row.seen),
    next: row.last_at && row.last_id ? { at: row.last_at, id: row.last_id } : after,
  };
}
