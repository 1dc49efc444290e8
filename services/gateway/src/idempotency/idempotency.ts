import { createHash } from 'node:crypto';
import { AppError } from '@svc/schema';

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
