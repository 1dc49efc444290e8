import { sql, type RawBuilder } from 'kysely';
import type { Db, DeliveryState } from '@svc/schema';

/**
 * The dispatcher's side of deliveries (`entregas`): the rows a fan-out creates, and the attempts
 * made on them. The gateway records PINGs and reads deliveries for its API.
 */

export interface PendingDelivery {
  deliveryId: string;
  eventId: string;
  webhookId: string;
}

/**
 * One delivery per routed (event, webhook) pair (`routed`: rows of event_id, evento, webhook_id),
 * in one statement; returns every one of them still pending. A second run of the same fan-out (a
 * stalled job) meets the unique (evento_id, webhook_id) index and inserts nothing: the rows of the
 * first run come back from the snapshot the statement started with, so their jobs are queued again
 * under the same job ids (a no-op in Redis when they are still there).
 */
export async function insertDeliveries(db: Db, routed: RawBuilder<unknown>): Promise<PendingDelivery[]> {
  const result = await sql<{ id: string; evento_id: string; webhook_id: string }>`
    with routed as (${routed}),
    ins as (
      insert into entregas (id, webhook_id, evento_id, evento)
      select gen_random_uuid(), webhook_id, event_id, evento from routed
      on conflict (evento_id, webhook_id) where evento_id is not null do nothing
      returning id, evento_id, webhook_id
    )
    select id, evento_id, webhook_id from ins
    union all
    select e.id, e.evento_id, e.webhook_id
    from entregas e join routed r on e.evento_id = r.event_id and e.webhook_id = r.webhook_id
    where e.estado = 'pendiente'
  `.execute(db);
  return result.rows.map((r) => ({ deliveryId: r.id, eventId: r.evento_id, webhookId: r.webhook_id }));
}

/** The state of each delivery of a batch, in one query; unknown ids are simply absent. */
export async function findDeliveryStates(db: Db, ids: readonly string[]): Promise<Map<string, DeliveryState>> {
  if (ids.length === 0) return new Map();
  const rows = await db
    .selectFrom('entregas')
    .select(['id', 'estado'])
    .where('id', '=', sql<string>`any(${sql.val([...ids])}::uuid[])`)
    .execute();
  return new Map(rows.map((r) => [r.id, r.estado]));
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
}

/**
 * Records a batch of attempts in one UPDATE. Only pending rows change, so a duplicate run of a
 * delivery that already ended (a stalled job picked up twice) cannot overwrite its outcome.
 * `intentos` takes the attempt's number rather than adding one: a job re-run after a crash repeats
 * the same attempt, and the count stays within 1..3. Returns the ids that changed.
 */
export async function recordAttempts(db: Db, attempts: readonly AttemptRecord[]): Promise<Set<string>> {
  if (attempts.length === 0) return new Set();
  const result = await sql<{ id: string }>`
    update entregas as e set
      intentos = greatest(e.intentos, v.intento),
      status_code = v.status_code,
      ultimo_intento_en = v.at,
      estado = v.estado,
      exitoso = (v.estado = 'exitosa')
    from unnest(
      ${sql.val(attempts.map((a) => a.id))}::uuid[],
      ${sql.val(attempts.map((a) => a.attempt))}::int[],
      ${sql.val(attempts.map((a) => a.statusCode))}::int[],
      ${sql.val(attempts.map((a) => a.at.toISOString()))}::timestamptz[],
      ${sql.val(attempts.map((a) => a.estado))}::text[]
    ) as v(id, intento, status_code, at, estado)
    where e.id = v.id and e.estado = 'pendiente'
    returning e.id
  `.execute(db);
  return new Set(result.rows.map((r) => r.id));
}

/** Ends a pending delivery as failed without an attempt (its webhook was deactivated meanwhile). */
export async function abandonDelivery(db: Db, id: string): Promise<boolean> {
  const row = await db
    .updateTable('entregas')
    .set({ estado: 'fallida', exitoso: false })
    .where('id', '=', id)
    .where('estado', '=', 'pendiente')
    .returning('id')
    .executeTakeFirst();
  return row !== undefined;
}
