import { sql, type RawBuilder } from 'kysely';
import { removalCandidates, type RemovalCursor } from '../support/removal-cursor';
import { EVENT_JOB_COLUMNS, eventJobOf, type OutboxRow, type ShipmentEventJob } from '@svc/contracts';
import type { Db, Transaction } from '@svc/platform';

/**
 * The dispatcher's side of the event log (`outbox`): which events have been fanned out, and the
 * events themselves when their work has to be rebuilt. The gateway writes the events and relays
 * them.
 */

/**
 * Marks the events fanned out (the first time only), as a fragment of the statement that records
 * their deliveries. The row is found by its id alone: that statement runs on a generic plan
 * (prepared, planned once per connection), and with `repartido_en is null` in the filter that plan
 * also walked `outbox_sin_repartir_idx`, every event not yet fanned out, at each run.
 */
export function markFannedOut(eventIds: readonly string[]): RawBuilder<unknown> {
  return sql`
    update outbox set repartido_en = coalesce(repartido_en, now())
    where id = any(${sql.val([...eventIds])}::uuid[])
    returning id`;
}

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

/**
 * Retention: looks at the next `limit` events after `after` created more than `retentionDays` ago,
 * along `outbox_created_idx` (a keyset walk, as for deliveries), and removes those done with (their
 * rows carry the deliveries' payloads): relayed, fanned out, and named by no delivery left
 * (originals through the unique (evento_id, webhook_id) index, resends through
 * `entregas_reenvio_evento_idx`). An event not yet fanned out is owed work and stays whatever its
 * age, and so does one a pending delivery or a recent resend still sends. Rows another transaction
 * holds are skipped. The candidates are materialized first, so the plan stays this walk with one
 * index probe per event even when the statistics of `entregas` are stale after a large removal.
 */
export async function removeDeliveredEvents(
  db: Db,
  retentionDays: number,
  after: RemovalCursor,
  limit: number,
): Promise<{ removed: number; seen: number; next: RemovalCursor }> {
  const result = await sql<{ removed: string; seen: string; last_at: string | null; last_id: string | null }>`
    with candidates as materialized (${removalCandidates('outbox', retentionDays, after, limit)}
    ),
    doomed as (
      select o.id from outbox o join candidates c on c.id = o.id
      where o.enviado_en is not null and o.repartido_en is not null
        and not exists (select 1 from entregas e where e.evento_id = o.id and not e.es_reenvio)
        and not exists (select 1 from entregas e where e.evento_id = o.id and e.es_reenvio)
      for update of o skip locked
    ),
    gone as (delete from outbox o using doomed d where o.id = d.id returning 1),
    last as (select created_at::text as at, id::text as id from candidates order by created_at desc, id desc limit 1)
    select (select count(*) from gone) as removed, (select count(*) from candidates) as seen,
           (select at from last) as last_at, (select id from last) as last_id
  `.execute(db);
  const row = result.rows[0]!;
  return { removed: Number(row.removed), seen: Number(row.seen), next: row.last_at && row.last_id ? { at: row.last_at, id: row.last_id } : after };
}
