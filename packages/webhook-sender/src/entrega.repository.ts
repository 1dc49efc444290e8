import { sql } from 'kysely';
import type { DeliveryState, Db, EventName } from '@svc/schema';

/**
 * Deliveries (`entregas`): one row per (event, webhook) or per PING. Shared by the gateway (PING,
 * detail, list) and the dispatcher (attempts), so both write the same shape. The fan-out's insert
 * lives with its routing query in the dispatcher (one statement).
 */

/** A delivery as the webhook detail shows it. */
export interface DeliveryRecord {
  id: string;
  evento: EventName;
  exitoso: boolean;
  statusCode: number;
  intentos: number;
  ultimoIntentoEn: Date | null;
  createdAt: Date;
}

/** What the dispatcher needs to send one delivery: its state and its webhook's target. */
export interface DeliveryTarget {
  id: string;
  estado: DeliveryState;
  webhookId: string;
  url: string;
  /** The signing key: never log it. */
  secret: string;
  activo: boolean;
}

/** One query for a batch of deliveries about to be attempted. Missing ids are simply absent. */
export async function findDeliveryTargets(db: Db, ids: readonly string[]): Promise<Map<string, DeliveryTarget>> {
  if (ids.length === 0) return new Map();
  const rows = await db
    .selectFrom('entregas as e')
    .innerJoin('webhooks as w', 'w.id', 'e.webhook_id')
    .select(['e.id', 'e.estado', 'e.webhook_id as webhookId', 'w.url', 'w.secret', 'w.activo'])
    .where('e.id', '=', sql<string>`any(${sql.val([...ids])}::uuid[])`)
    .execute();
  return new Map(rows.map((r) => [r.id, r]));
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

/** Records the single attempt of a PING (the test operation): one row, already final. */
export async function insertPingDelivery(
  db: Db,
  ping: { id: string; webhookId: string; ok: boolean; statusCode: number; at: Date },
): Promise<DeliveryRecord> {
  const row = await db
    .insertInto('entregas')
    .values({
      id: ping.id,
      webhook_id: ping.webhookId,
      evento_id: null,
      evento: 'PING',
      estado: ping.ok ? 'exitosa' : 'fallida',
      exitoso: ping.ok,
      status_code: ping.statusCode,
      intentos: 1,
      ultimo_intento_en: ping.at,
      // Created when its one attempt began, not when the attempt (up to 5 s) ended and was recorded.
      created_at: ping.at,
    })
    .returning(['id', 'evento', 'exitoso', 'status_code', 'intentos', 'ultimo_intento_en', 'created_at'])
    .executeTakeFirstOrThrow();
  return toRecord(row);
}

/**
 * The newest deliveries of a webhook that have been attempted, newest first (the detail's window).
 * A delivery waiting for its first attempt (or ended unattempted because its webhook was
 * deactivated) has no `intentos` (1 to 3) nor `ultimoIntentoEn` to show, as the list's
 * `ultimoDelivery` has no outcome for it.
 */
export async function latestDeliveries(db: Db, webhookId: string, limit: number): Promise<DeliveryRecord[]> {
  const rows = await db
    .selectFrom('entregas')
    .select(['id', 'evento', 'exitoso', 'status_code', 'intentos', 'ultimo_intento_en', 'created_at'])
    .where('webhook_id', '=', webhookId)
    .where('ultimo_intento_en', 'is not', null)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(limit)
    .execute();
  return rows.map(toRecord);
}

export interface LastAttempt {
  exitoso: boolean;
  statusCode: number;
  fecha: Date;
}

/**
 * The latest delivery that has been attempted, per webhook (the list's `ultimoDelivery`). A
 * delivery still waiting for its first attempt has no outcome to show yet, so it is skipped.
 */
export async function lastAttemptPerWebhook(db: Db, webhookIds: readonly string[]): Promise<Map<string, LastAttempt>> {
  if (webhookIds.length === 0) return new Map();
  const result = await sql<{ webhook_id: string; exitoso: boolean; status_code: number; ultimo_intento_en: Date }>`
    select w.id as webhook_id, d.exitoso, d.status_code, d.ultimo_intento_en
    from unnest(${sql.val([...webhookIds])}::uuid[]) as w(id)
    cross join lateral (
      select e.exitoso, e.status_code, e.ultimo_intento_en
      from entregas e
      where e.webhook_id = w.id and e.ultimo_intento_en is not null
      order by e.created_at desc, e.id desc
      limit 1
    ) d
  `.execute(db);
  return new Map(
    result.rows.map((r) => [r.webhook_id, { exitoso: r.exitoso, statusCode: r.status_code, fecha: r.ultimo_intento_en }]),
  );
}

function toRecord(r: {
  id: string;
  evento: EventName;
  exitoso: boolean;
  status_code: number;
  intentos: number;
  ultimo_intento_en: Date | null;
  created_at: Date;
}): DeliveryRecord {
  return {
    id: r.id,
    evento: r.evento,
    exitoso: r.exitoso,
    statusCode: r.status_code,
    intentos: r.intentos,
    ultimoIntentoEn: r.ultimo_intento_en,
    createdAt: r.created_at,
  };
}
