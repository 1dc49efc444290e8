import { sql } from 'kysely';
import { dropDaysEndedBefore, type Db, type Transaction } from '@svc/platform';

/**
 * How long a key holds its answer (operations.md: the same key with the same body within 24 hours
 * answers the first response again). Past it a key may be taken over, and its answer, which holds a
 * recipient's name, phone and address, goes with its day's partition once every key of that day
 * has expired (at most a day later).
 */
export const KEY_LIFETIME_HOURS = 24;
const KEY_LIFETIME = sql.raw(`interval '${KEY_LIFETIME_HOURS} hours'`);

export interface StoredAnswer {
  requestHash: string;
  statusCode: number | null;
  /** The answer's JSON text, byte for byte as first sent (jsonb would reorder its keys). */
  body: string | null;
}

/** The advisory lock class of idempotency keys: one claim of a key at a time. */
const KEY_LOCK_CLASS = 0x1de7;

/** A key's row that still holds its answer: claimed within KEY_LIFETIME_HOURS. */
const LIVE = sql<boolean>`created_at > now() - ${KEY_LIFETIME}`;

/**
 * Claims the key in the caller's transaction: true when this request owns it (new, or its last
 * claim expired). The table is partitioned by day, so no unique index spans a key's lifetime (it
 * may start yesterday): the claim takes a transaction lock on the key first, so a concurrent claim
 * of the same key waits until the owner commits (then it is not claimed and reads the stored
 * answer) or rolls back (then it claims). The insert is its own statement, after the lock: it sees
 * what a claim committed while this one waited. An expired row is never honoured, whether or not
 * its day's partition has been dropped yet.
 */
export async function claimKey(trx: Transaction, scope: string, clave: string, requestHash: string): Promise<boolean> {
  await sql`select pg_advisory_xact_lock(${KEY_LOCK_CLASS}, hashtext(${scope} || ' ' || ${clave}))`.execute(trx);
  const result = await sql<{ clave: string }>`
    insert into idempotencia (scope, clave, request_hash)
    select ${scope}, ${clave}, ${requestHash}
    where not exists (select 1 from idempotencia where scope = ${scope} and clave = ${clave} and ${LIVE})
    returning clave`.execute(trx);
  return result.rows.length > 0;
}

/** The answer stored under a live key that could not be claimed (the key's lock is ours). */
export async function findAnswer(trx: Transaction, scope: string, clave: string): Promise<StoredAnswer | undefined> {
  const row = await trx
    .selectFrom('idempotencia')
    .select(['request_hash', 'status_code', 'response'])
    .where('scope', '=', scope)
    .where('clave', '=', clave)
    .where(LIVE)
    .orderBy('created_at', 'desc')
    .limit(1)
    .executeTakeFirst();
  return row && { requestHash: row.request_hash, statusCode: row.status_code, body: typeof row.response === 'string' ? row.response : null };
}

/** Stores the answer in the transaction that made it, so it exists exactly when the change does. */
export async function storeAnswer(trx: Transaction, scope: string, clave: string, statusCode: number, body: string): Promise<void> {
  await trx
    .updateTable('idempotencia')
    // Kept as a JSON string value: a replay then repeats the very bytes of the first answer.
    .set({ status_code: statusCode, response: JSON.stringify(body) })
    .where('scope', '=', scope)
    .where('clave', '=', clave)
    .where(LIVE)
    .execute();
}

/**
 * Drops the days of keys that all expired (the whole day ended more than KEY_LIFETIME_HOURS ago)
 * with their answers, whole partitions. Returns how many keys went.
 */
export function removeExpiredKeys(db: Db, now: Date): Promise<number> {
  return dropDaysEndedBefore(db, 'idempotencia', new Date(now.getTime() - KEY_LIFETIME_HOURS * 3_600_000));
}
