import { createHash } from 'node:crypto';
import { AppError } from '@svc/contracts';
import type { Db } from '@svc/platform';
import { claimKey, findAnswer, storeAnswer } from './idempotency.repository';

/** What a creation needs to honour an `Idempotency-Key`: where the key lives and what it guards. */
export interface IdempotencyRequest {
  /** The token and the route: one caller's keys never meet another's, nor another route's. */
  scope: string;
  key: string;
  /** SHA-256 of the canonical body: the same JSON however its keys are ordered. */
  requestHash: string;
}

const KEY = /^[\x20-\x7e]{1,255}$/;

/** undefined when the header is absent; 400 VALIDATION_ERROR when present but not 1-255 printable ASCII characters. */
export function readIdempotencyKey(header: string | string[] | undefined): string | undefined {
  if (header === undefined) return undefined;
  if (typeof header !== 'string' || !KEY.test(header)) {
    throw new AppError('VALIDATION_ERROR', 'Idempotency-Key must be 1 to 255 printable ASCII characters');
  }
  return header;
}

/** JSON with object keys sorted at every level, so a re-sent body hashes the same. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

export function requestHash(body: unknown): string {
  return createHash('sha256').update(canonicalJson(body), 'utf8').digest('hex');
}

export function idempotencyRequest(
  header: string | string[] | undefined,
  tokenId: string,
  route: string,
  body: unknown,
): IdempotencyRequest | undefined {
  const key = readIdempotencyKey(header);
  if (key === undefined) return undefined;
  return { scope: `${tokenId}:${route}`, key, requestHash: requestHash(body) };
}

export interface IdempotentAnswer {
  status: number;
  body: unknown;
  /** True when the answer is the stored one of an earlier request with the same key. */
  replayed: boolean;
}

/**
 * Runs `work` at most once per key. Without a key, `work` runs as it is (on `db`, where one
 * statement is its own transaction). With one, it runs in the transaction that claims the key and
 * stores its answer, so the answer exists exactly when the change does: the same key with the same
 * body answers the stored answer again and runs nothing; with another body, 409
 * IDEMPOTENCY_CONFLICT. A concurrent request with the same key waits for the first to commit.
 */
export async function idempotent(
  db: Db,
  request: IdempotencyRequest | undefined,
  work: (db: Db) => Promise<{ status: number; body: unknown }>,
): Promise<IdempotentAnswer> {
  if (!request) return { ...(await work(db)), replayed: false };
  const { scope, key, requestHash: hash } = request;
  return db.transaction().execute(async (trx): Promise<IdempotentAnswer> => {
    if (!(await claimKey(trx, scope, key, hash))) {
      const stored = await findAnswer(trx, scope, key);
      if (!stored || stored.requestHash !== hash || stored.statusCode === null || stored.body === null) {
        throw new AppError('IDEMPOTENCY_CONFLICT', 'this Idempotency-Key was already used with a different body');
      }
      return { status: stored.statusCode, body: JSON.parse(stored.body) as unknown, replayed: true };
    }
    const answer = await work(trx);
    await storeAnswer(trx, scope, key, answer.status, JSON.stringify(answer.body));
    return { ...answer, replayed: false };
  });
}
