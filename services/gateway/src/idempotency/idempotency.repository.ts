import { sql } from 'kysely';
import type { Db, Transaction } from '@svc/platform';

/**
 * How long a key holds its answer (operations.md: the same key with the same body within 24 hours
 * answers the first response again). Past it a key may be taken over, and its answer, which holds a
 * recipient's name, phone and address, is deleted.
 */
export const KEY_LIFETIME_HOURS = 24;
const KEY_LIFETIME = sql.raw(`interval '${KEY_LIFETIME_HOURS} hours'`);

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
        .where('idempotencia.created_at', '<', sql<Date>`now() - ${KEY_LIFETIME}`),
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
 * Removes up to `limit` expired keys (claimed more than KEY_LIFETIME_HOURS ago) with their answers,
 * oldest first along `idempotencia_created_idx`, skipping any a request holds (one taking the key
 * over). Returns how many went.
 */
export async function removeExpiredKeys(db: Db, limit: number): Promise<number> {
  const result = await sql`
    with doomed as (
      select scope, clave from idempotencia
      where created_at < now() - ${KEY_LIFETIME}
      order by created_at
      limit ${limit}
      for update skip locked
    )
    delete from idempotencia i using doomed d where i.scope = d.scope and i.clave = d.clave
  `.execute(db);
  return Number(result.numAffectedRows ?? 0);
}
