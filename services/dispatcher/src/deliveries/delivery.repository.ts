import { sql, type RawBuilder } from 'kysely';
import type { AttemptErrorClass, Db, DeliveryState } from '@svc/schema';

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
 * webhook_id),
 * due at once, in one statement that also runs `alongside` (the fan-out marks its events there);
 * returns every one of them still pending. A second run of the same fan-out (a stalled job, or
 * the reconciler's re-queue) meets the unique (evento_id, webhook_id) index and inserts nothing:
 * the rows of the first run come back from the snapshot the statement started with, so their jobs
 * are queued again under the same job ids (a no-op in Redis when they are still there).
 */
export async function insertDeliveries(db: Db, routed: RawBuilder<unknown>, alongside: RawBuilder<unknown>): Promise<PendingDelivery[]> {
  const result = await sql<{ id: string; evento_id: string; webhook_id: string; intentos: number; fresh: boolean }>`
    with routed as (${routed}),
    alongside as (${alongside}),
    ins as (
      insert into entregas (id, webhook_id, evento_id, evento, numero_guia, proximo_intento_en)
      select gen_random_uuid(), webhook_id, event_id, evento, numero_guia, now() from routed
      on conflict (evento_id, webhook_id) where evento_id is not null do nothing
      returning id, evento_id, webhook_id, intentos
    )
    select id, evento_id, webhook_id, intentos, true as fresh from ins
    union all
    select e.id, e.evento_id, e.webhook_id, e.intentos, false as fresh
    from entregas e join routed r on e.evento_id = r.event_id and e.webhook_id = r.webhook_id
    where e.estado = 'pendiente'
  `.execute(db);
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
  const result = await sql<{ id: string }>`
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
  `.execute(db);
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
  eventId: string;
  /** The number of its next attempt. */
  attempt: number;
}

/**
 * Claims pending deliveries whose next attempt is more than `graceMs` overdue, oldest first: their
 * due time moves `graceMs` ahead, so that other reconcilers (and this one's next pass) leave them
 * alone while their work is queued again. Rows locked by someone else are skipped.
 */
export async function claimOverdue(db: Db, graceMs: number, limit: number): Promise<OverdueDelivery[]> {
  const grace = sql`make_interval(secs => ${graceMs / 1000})`;
  const result = await sql<{ id: string; webhook_id: string; evento_id: string; intentos: number }>`
    update entregas set proximo_intento_en = now() + ${grace}
    where id in (
      select id from entregas
      where estado = 'pendiente' and proximo_intento_en < now() - ${grace} and evento_id is not null
      order by proximo_intento_en
      limit ${limit}
      for update skip locked
    )
    returning id, webhook_id, evento_id, intentos
  `.execute(db);
  return result.rows.map((r) => ({ deliveryId: r.id, webhookId: r.webhook_id, eventId: r.evento_id, attempt: r.intentos + 1 }));
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
