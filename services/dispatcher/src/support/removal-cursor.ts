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
