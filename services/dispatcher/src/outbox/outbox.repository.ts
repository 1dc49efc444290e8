import { sql } from 'kysely';
import { EVENT_JOB_COLUMNS, eventJobOf, type OutboxRow, type ShipmentEventJob } from '@svc/contracts';
import type { Db, Transaction } from '@svc/platform';

/**
 * The dispatcher's reads of the event log (`outbox`): the events not yet fanned out, and the events
 * themselves when their work has to be rebuilt. Every write (the gateway's events and relay marks,
 * the fan-out's mark, retention) is the table module's (@svc/platform, tables/outbox.table.ts).
 */

/**
 * Events committed more than `graceMs` ago and still not fanned out, oldest first, locked until the
 * transaction ends so that other reconcilers skip them.
 */
export async function lockUnfanned(trx: Transaction, graceMs: number, limit: number): Promise<ShipmentEventJob[]> {
  const result = await sql<OutboxRow>`
    select ${sql.join(EVENT_JOB_COLUMNS.map((c) => sql.ref(c)))} from outbox
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
    .select(EVENT_JOB_COLUMNS)
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
