import { sql } from 'kysely';
import type { Db, Transaction } from '@svc/schema';

export interface StoredAnswer {
  requestHash: string;
  statusCode: number | null;
  /** The answer's JSON text, byte for byte as first sent (jsonb would reorder its keys). */
  body: string | null;
}

/**
 * Claims the key in the caller's transaction: true when this request owns it (new, or an expired
 * key taken over). A concurrent claim of the same key waits on the unique index until the owner
 * commits (then it is not claimed and reads the stored answer) or rolls back (then it claims).
 */
export async function claimKey(trx: Transaction, scope: string, clave: string, requestHash: string): Promise<boolean> {
  const row = await trx
    .insertInto('idempotencia')
    .values({ scope, clave, request_hash: requestHash })
    .onConflict((oc) =>
      oc
        .columns(['scope', 'clave'])
        .doUpdateSet({ request_hash: requestHash, status_code: null, response: null, created_at: sql<Date>`now()` })
        .where('idempotencia.created_at', '<', sql<Date>`now() - interval '24 hours'`),
    )
    .returning('clave')
    .executeTakeFirst();
  return row !== undefined;
}

/** The answer stored under a key that could not be claimed (ON CONFLICT locked the row for us). */
export async function findAnswer(trx: Transaction, scope: string, clave: string): Promise<StoredAnswer | undefined> {
  const row = await trx
    .selectFrom('idempotencia')
    .select(['request_hash', 'status_code', 'response'])
    .where('scope', '=', scope)
    .where('clave', '=', clave)
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
    .execute();
}

/**
 * Retention: removes up to `limit` keys claimed more than `retentionDays` ago (RETENTION_DAYS, at
 * least 1: every such key has expired, a key being taken over after 24 hours), oldest first along
 * `idempotencia_created_idx`, skipping any a request holds. Returns how many went.
 */
export async function removeExpiredKeys(db: Db, retentionDays: number, limit: number): Promise<number> {
  const result = await sql`
    with doomed as (
      select scope, clave from idempotencia
      where created_at < now() - make_interval(days => ${retentionDays})
      order by created_at
      limit ${limit}
      for update skip locked
    )
    delete from idempotencia i using doomed d where i.scope = d.scope and i.clave = d.clave
  `.execute(db);
  return Number(result.numAffectedRows ?? 0);
}
