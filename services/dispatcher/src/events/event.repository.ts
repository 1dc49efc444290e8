import { sql, type RawBuilder } from 'kysely';
import { eventJobOf, type Db, type OutboxRow, type ShipmentEventJob, type Transaction } from '@svc/schema';

/**
 * The dispatcher's side of the event log (`outbox`): which events have been fanned out, and the
 * events themselves when their work has to be rebuilt. The gateway writes the events and relays
 * them.
 */

/** Marks the events fanned out, as a fragment of the statement that records their deliveries. */
export function markFannedOut(eventIds: readonly string[]): RawBuilder<unknown> {
  return sql`
    update outbox set repartido_en = now()
    where id = any(${sql.val([...eventIds])}::uuid[]) and repartido_en is null
    returning id`;
}

/**
 * Events committed more than `graceMs` ago and still not fanned out, oldest first, locked until the
 * transaction ends so that other reconcilers skip them.
 */
export async function lockUnfanned(trx: Transaction, graceMs: number, limit: number): Promise<ShipmentEventJob[]> {
  const result = await sql<OutboxRow>`
    select id, evento, empresa_id, sucursal_id, data, created_at, request_id from outbox
    where repartido_en is null and created_at < now() - make_interval(secs => ${graceMs / 1000})
    order by created_at limit ${limit}
    for update skip locked`.execute(trx);
  return result.rows.map(eventJobOf);
}

/** The events of a batch of ids; unknown ids are simply absent. */
export async function findEvents(db: Db, ids: readonly string[]): Promise<Map<string, ShipmentEventJob>> {
  if (ids.length === 0) return new Map();
  const rows = await db
    .selectFrom('outbox')
    .select(['id', 'evento', 'empresa_id', 'sucursal_id', 'data', 'created_at', 'request_id'])
    .where('id', '=', sql<string>`any(${sql.val([...ids])}::uuid[])`)
    .execute();
  return new Map(rows.map((r) => [r.id, eventJobOf(r)]));
}

/** Age in seconds of the oldest event not fanned out (0 when none): a gauge. */
export async function oldestUnfannedAge(db: Db): Promise<number> {
  const row = await db
    .selectFrom('outbox')
    .select(sql<string | null>`extract(epoch from now() - min(created_at))`.as('age'))
    .where('repartido_en', 'is', null)
    .executeTakeFirstOrThrow();
  return row.age === null ? 0 : Math.max(0, Number(row.age));
}
