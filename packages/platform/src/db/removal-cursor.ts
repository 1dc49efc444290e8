import { sql, type RawBuilder } from 'kysely';

/**
 * Where a retention pass stands in a `(created_at, id)` index: the last row it looked at. The
 * timestamp is Postgres's text, to the microsecond (a JS Date would round it off).
 */
export interface RemovalCursor {
  at: string;
  id: string;
}

/** Before every row. */
export const REMOVAL_START: RemovalCursor = { at: '-infinity', id: '00000000-0000-0000-0000-000000000000' };

/**
 * The next `limit` rows of `table` older than `retentionDays` after `after`, in index order: the
 * candidates a retention batch considers, each table then keeping those it may not remove yet.
 */
export const removalCandidates = (table: 'entregas' | 'outbox', retentionDays: number, after: RemovalCursor, limit: number): RawBuilder<unknown> => sql`
      select id, created_at from ${sql.table(table)}
      where created_at < now() - make_interval(days => ${retentionDays})
        and (created_at, id) > (${after.at}::timestamptz, ${after.id}::uuid)
      order by created_at, id
      limit ${limit}`;

/** A retention batch's last candidate, as its statement returns it: null when it saw none. */
export interface LastCandidate {
  last_at: string | null;
  last_id: string | null;
}

/** Where the batch after one that returned `row` starts: its last candidate, or `after` again when it saw none. */
export const nextRemovalCursor = (row: LastCandidate, after: RemovalCursor): RemovalCursor =>
  row.last_at && row.last_id ? { at: row.last_at, id: row.last_id } : after;
