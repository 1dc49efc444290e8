import { sql } from 'kysely';
import type { Db, EventName } from '@svc/schema';

/**
 * The gateway's side of deliveries (`entregas`): the PING it records, and what the webhook detail
 * and list show. Attempts of event deliveries are the dispatcher's to record.
 */

/** A delivery as the webhook detail shows it. */
export interface Delivery {
  id: string;
  evento: EventName;
  exitoso: boolean;
  statusCode: number;
  intentos: number;
  ultimoIntentoEn: Date | null;
  createdAt: Date;
}

/** Records the single attempt of a PING (the test operation): one row, already final. */
export async function insertPingDelivery(
  db: Db,
  ping: { id: string; webhookId: string; ok: boolean; statusCode: number; at: Date },
): Promise<Delivery> {
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
export async function latestDeliveries(db: Db, webhookId: string, limit: number): Promise<Delivery[]> {
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
}): Delivery {
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
