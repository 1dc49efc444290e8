import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import type { Db } from './database';
import { isPlaintextSecret, SEALED_PREFIX, sealedKeyIdOf, SealedSecretError, type SecretBox, type UnopenedReason } from './sealed-secrets';
import { eraseEndedPreviousSecrets, SEALING_BATCH, writeResealedSecrets, type ResealedSecrets } from './tables/webhooks.table';

/**
 * The passes over `webhooks` that keep its secrets sealed under the first key of SECRETS_KEY
 * (docs/decisions/0006-secrets-sealed-at-rest.md): run by every gateway and dispatcher as it starts,
 * before it serves or sends, and (plaintext and expired previous secrets only) by the gateway's
 * upkeep task. Written once here because both services run them; their writes are the table
 * module's (tables/webhooks.table.ts).
 */

/**
 * The session lock that makes concurrent starting processes seal one after another (the second
 * finds nothing left to do) rather than open and re-seal the same rows side by side. Any fixed
 * number no other lock of the platform uses (within 2^53, so it travels as a plain number).
 */
const SEALING_LOCK = 720_493_511_822_631;
/** While another process holds the lock, how often to ask again (a pass takes milliseconds per batch). */
const LOCK_POLL_MS = 100;

const FIRST_ID = '00000000-0000-0000-0000-000000000000';

type Counts = Pick<SealingReport, 'sealed' | 'resealed'>;

/** What a sealing pass did. */
export interface SealingReport {
  /** Values stored in plaintext (from before sealing) now sealed. */
  sealed: number;
  /** Values sealed under another key now sealed under the first. */
  resealed: number;
  /** Rows left as they were because a value did not open (its webhook cannot sign until fixed). */
  unopened: Array<{ webhookId: string; reason: UnopenedReason; keyId: string | null }>;
}

/**
 * The keys, by id, that sealed some stored secret but that SECRETS_KEY does not list, with how many
 * webhooks each holds; empty when every key is there. A start refuses when it is not empty: those
 * secrets would no longer open, and their webhooks would stop being signed.
 */
export async function missingSealingKeys(db: Db, box: SecretBox): Promise<Array<{ keyId: string; webhooks: number }>> {
  const { rows } = await sql<{ key_id: string; webhooks: number }>`
    select key_id, count(distinct id)::int as webhooks
    from (
      select id, substr(secret, ${SEALED_PREFIX.length + 1}, 8) as key_id from webhooks where starts_with(secret, ${SEALED_PREFIX})
      union all
      select id, substr(secreto_anterior, ${SEALED_PREFIX.length + 1}, 8) from webhooks where starts_with(secreto_anterior, ${SEALED_PREFIX})
    ) s
    group by key_id
    order by key_id`.execute(db);
  return rows.filter((r) => !box.keyIds.includes(r.key_id)).map((r) => ({ keyId: r.key_id, webhooks: r.webhooks }));
}

/** Throws when a stored secret was sealed under a key SECRETS_KEY no longer lists, naming each missing key. */
export async function requireSealingKeys(db: Db, box: SecretBox): Promise<void> {
  const missing = await missingSealingKeys(db, box);
  if (missing.length === 0) return;
  const list = missing.map((m) => `${m.keyId} (${m.webhooks} webhook${m.webhooks === 1 ? '' : 's'})`).join(', ');
  throw new Error(
    `SECRETS_KEY lacks keys that sealed stored webhook secrets: key ids ${list}. Those secrets would no longer open: ` +
      `put the keys back in SECRETS_KEY (after the key that seals; it lists ${box.keyIds.join(', ')}) and start again, ` +
      'which re-seals them under the first key; drop a key only once no start reports it missing.',
  );
}

/**
 * Seals what is not sealed under the first key, batch after batch along the primary key: plaintext
 * values always; values sealed under another listed key too unless `plaintextOnly` (a periodic pass
 * runs beside processes that may still list the keys in another order, and must not undo their
 * re-sealing). Each row is written only if it is still as read (a rotation in between wins), and a
 * value that does not open leaves its row as it is, reported. The `webhook_versions` trigger counts
 * each re-sealed row as a change: the dispatchers read its routes again, with the same secrets.
 *
 * `wait`: when another process is sealing, wait for it (a start: it must not serve before the rows
 * are sealed) or return at once with nothing done (a periodic pass).
 */
export async function sealStoredSecrets(
  db: Db,
  box: SecretBox,
  options: { plaintextOnly?: boolean; wait?: boolean; batchSize?: number } = {},
): Promise<SealingReport> {
  const batchSize = options.batchSize ?? SEALING_BATCH;
  const plaintextOnly = options.plaintextOnly ?? false;
  const report: SealingReport = { sealed: 0, resealed: 0, unopened: [] };
  // Literals, not parameters: the plaintext query then matches the partial index webhooks_plaintext_idx.
  const sealedPrefix = plaintextOnly ? SEALED_PREFIX : `${SEALED_PREFIX}${box.sealingKeyId}:`;
  const pattern = sql.lit(`${sealedPrefix}%`);

  return db.connection().execute(async (conn) => {
    for (;;) {
      const { rows } = await sql<{ locked: boolean }>`select pg_try_advisory_lock(${SEALING_LOCK}::bigint) as locked`.execute(conn);
      if (rows[0]?.locked) break;
      if (!options.wait) return report;
      await sleep(LOCK_POLL_MS);
    }
    try {
      for (let after = FIRST_ID; ; ) {
        const { rows } = await sql<{ id: string; secret: string; secreto_anterior: string | null }>`
          select id, secret, secreto_anterior from webhooks
          where (secret not like ${pattern} or secreto_anterior not like ${pattern}) and id > ${after}
          order by id
          limit ${batchSize}`.execute(conn);
        const updates: Array<ResealedSecrets & { counts: Counts }> = [];
        for (const row of rows) {
          const counts: Counts = { sealed: 0, resealed: 0 };
          try {
            const secret = resealed(box, row.id, row.secret, counts, plaintextOnly);
            const previous = row.secreto_anterior === null ? null : resealed(box, row.id, row.secreto_anterior, counts, plaintextOnly);
            updates.push({ id: row.id, oldSecret: row.secret, oldPrevious: row.secreto_anterior, secret, previous, counts });
          } catch (err) {
            if (!(err instanceof SealedSecretError)) throw err;
            report.unopened.push({ webhookId: row.id, reason: err.reason, keyId: err.keyId });
          }
        }
        if (updates.length > 0) {
          const ids = await writeResealedSecrets(conn, updates);
          // Rows a rotation changed in between are left to it (and counted by no one).
          for (const u of updates) {
            if (!ids.has(u.id)) continue;
            report.sealed += u.counts.sealed;
            report.resealed += u.counts.resealed;
          }
        }
        const last = rows.at(-1);
        if (last === undefined || rows.length < batchSize) return report;
        after = last.id;
      }
    } finally {
      await sql`select pg_advisory_unlock(${SEALING_LOCK}::bigint)`.execute(conn);
    }
  });
}

/**
 * A stored value as the pass leaves it: sealed if plaintext; re-sealed under the first key if sealed
 * under another (unless `plaintextOnly`); else as it is.
 */
function resealed(box: SecretBox, webhookId: string, stored: string, counts: Counts, plaintextOnly: boolean): string {
  if (isPlaintextSecret(stored)) {
    counts.sealed++;
    return box.seal(webhookId, stored);
  }
  if (plaintextOnly || sealedKeyIdOf(stored) === box.sealingKeyId) return stored;
  const opened = box.open(webhookId, stored);
  counts.resealed++;
  return box.seal(webhookId, opened);
}

/** What a start did to the stored secrets. */
export interface SecretsAtStart extends SealingReport {
  /** Previous secrets past their overlap, erased. */
  erased: number;
}

/** Where a start says what it did: a service's logger, taken by its shape (this package logs nothing itself). */
export interface SealingLog {
  info(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

/**
 * What every gateway and dispatcher does before it serves or sends: erases previous secrets past
 * their overlap (one sealed under a dropped key must not stop a start), refuses to go on when a
 * stored secret was sealed under a key SECRETS_KEY no longer lists (throws, naming the key ids),
 * then seals plaintext values and re-seals those of other keys under the first, waiting for a
 * process already doing so; and says so on `log`.
 */
export async function prepareSecretsAtRest(db: Db, box: SecretBox, log: SealingLog): Promise<SecretsAtStart> {
  let erased = 0;
  for (let n = SEALING_BATCH; n === SEALING_BATCH; ) {
    n = await eraseEndedPreviousSecrets(db);
    erased += n;
  }
  await requireSealingKeys(db, box);
  const done = { erased, ...(await sealStoredSecrets(db, box, { wait: true })) };
  if (done.sealed + done.resealed + done.erased > 0) {
    log.info({ sealed: done.sealed, resealed: done.resealed, erased: done.erased, keyId: box.sealingKeyId }, 'webhook secrets sealed under the first key of SECRETS_KEY');
  }
  for (const u of done.unopened) log.error(u, UNOPENED_MESSAGE);
  return done;
}

/** Said at error level for each stored secret a pass could not open (its webhook id, reason and key id). */
export const UNOPENED_MESSAGE = 'a stored webhook secret does not open: its webhook is not signed until it is fixed';
