import { sql, type RawBuilder } from 'kysely';
import type { AttemptErrorClass } from '@svc/contracts';

/**
 * The one writer of the delivery log (`entrega_intentos`), as a fragment of the statements of
 * `entregas` (tables/deliveries.table.ts) that make the attempts' deliveries; retention drops a day's
 * attempts with that day's deliveries.
 */

/** One attempt of a delivery as the delivery log (`entrega_intentos`) keeps it. */
export interface DeliveryAttempt {
  deliveryId: string;
  /** 1-based number of this attempt. */
  attempt: number;
  /** When the attempt started. */
  at: Date;
  /** 0 when no HTTP status came back. */
  statusCode: number;
  durationMs: number;
  /** Why it failed; null for a success. */
  error: AttemptErrorClass | null;
  message: string | null;
  /** The start of the receiver's answer; null when none came. */
  response: string | null;
}

/**
 * Inserts `attempts`, each only if its delivery's id is among the rows of `written`, a relation of
 * the same statement that returns `id` and `particion_en` (the deliveries that statement inserted
 * or changed, and their partition key, which each attempt takes: a day's attempts go with that
 * day's deliveries). An attempt is so logged exactly when its delivery's row took it, never by a
 * duplicate run, and never without its delivery. A fragment for a `with` clause or for the
 * statement's last part; its parameters are eight arrays, the same text for any number of attempts
 * (fit for a prepared statement).
 */
export function insertDeliveryAttempts(attempts: readonly DeliveryAttempt[], written: string): RawBuilder<unknown> {
  return sql`
    insert into entrega_intentos (entrega_id, numero, fecha, status_code, duracion_ms, error, mensaje, respuesta, particion_en)
    select a.id, a.numero, a.fecha, a.status_code, a.duracion_ms, a.error, a.mensaje, a.respuesta, w.particion_en
    from unnest(
      ${sql.val(attempts.map((a) => a.deliveryId))}::uuid[],
      ${sql.val(attempts.map((a) => a.attempt))}::int[],
      ${sql.val(attempts.map((a) => a.at.toISOString()))}::timestamptz[],
      ${sql.val(attempts.map((a) => a.statusCode))}::int[],
      ${sql.val(attempts.map((a) => a.durationMs))}::int[],
      ${sql.val(attempts.map((a) => a.error))}::text[],
      ${sql.val(attempts.map((a) => a.message))}::text[],
      ${sql.val(attempts.map((a) => a.response))}::text[]
    ) as a(id, numero, fecha, status_code, duracion_ms, error, mensaje, respuesta)
    join ${sql.table(written)} w using (id)`;
}
