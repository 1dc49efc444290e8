import { createHmac, timingSafeEqual } from 'node:crypto';
import { verify } from './signature';
import { standardKey } from './standard-webhooks';

/**
 * Verifies one delivery as a receiver gets it: its raw body, its headers and the secret(s) the
 * receiver trusts. Accepted when any signature it carries matches any secret, under either scheme:
 *
 * - `svc`: `X-SVC-Signature` (or, during a rotation's overlap, `X-SVC-Signature-Anterior`),
 *   `sha256=<hex>` HMAC-SHA256 of the raw body keyed with the whole secret string; the signed time is
 *   the payload's `timestamp`.
 * - `standard` (Standard Webhooks): any `v1,<base64>` entry of `webhook-signature`, HMAC-SHA256 of
 *   `{webhook-id}.{webhook-timestamp}.{raw body}` keyed as `standardKey(secret)` says; the signed time
 *   is `webhook-timestamp`.
 *
 * Either way a delivery whose signed time is more than `toleranceSeconds` away from `now` (either
 * side) is refused, so a captured delivery cannot be replayed later. Every comparison of a signature
 * is constant-time (`crypto.timingSafeEqual`). Never throws for anything a sender controls; it
 * throws a TypeError only for a programming error (a negative or non-finite tolerance).
 */

/** Five minutes, as the Standard Webhooks libraries use. */
export const DEFAULT_TOLERANCE_SECONDS = 300;

/** Headers as node's `req.headers` gives them (lower-case names), any plain object, or a Fetch `Headers`. */
export type DeliveryHeaders = Record<string, string | string[] | undefined> | { get(name: string): string | null };

export interface VerifyDeliveryInput {
  /** The exact bytes received, before any JSON parsing (a string is read as UTF-8). */
  rawBody: string | Buffer;
  headers: DeliveryHeaders;
  /** The secret, or several (e.g. `[current, previous]` while you deploy a rotated secret). Empty strings are ignored. */
  secrets: string | readonly string[];
  /** How far the signed time may be from `now`, in seconds. Default 300. */
  toleranceSeconds?: number;
  /** The time to check against. Default: the current time. */
  now?: Date | number;
}

/** A delivery's body: `{ event, timestamp, webhookId, data }`. */
export interface DeliveryPayload {
  event: string;
  timestamp: string;
  webhookId: string;
  data: Record<string, unknown>;
}

export type VerifyScheme = 'svc' | 'standard';

export interface VerifiedDelivery {
  ok: true;
  /** Which signature matched: `X-SVC-Signature`/`-Anterior`, or `webhook-signature`. */
  scheme: VerifyScheme;
  /** The payload's `event` (`GUIA_CREADA`, ..., `PING`). */
  event: string;
  /** The parsed body. */
  payload: DeliveryPayload;
  /** The signed time that was checked against the tolerance. */
  signedAt: Date;
  /** Index in `secrets` (as given) of the first secret that matched: with `[current, previous]`, 1 says the sender still signs with the previous one only. */
  secretIndex: number;
}

/**
 * Why a delivery was refused:
 * - `no_secret`: no non-empty secret was given (an unset variable): everything is refused;
 * - `missing_signature`: none of `X-SVC-Signature`, `X-SVC-Signature-Anterior`, `webhook-signature`;
 * - `invalid_signature`: signatures present (or malformed), none matches any secret: a wrong secret,
 *   a changed body, a changed `webhook-id`/`webhook-timestamp`;
 * - `timestamp_out_of_tolerance`: a signature matched, but its signed time is too old (a replay) or
 *   too far in the future;
 * - `invalid_payload`: a signature matched, but the body is not a delivery (not JSON, or no
 *   `event`/`timestamp`) or its signed time is unreadable.
 */
export type VerifyFailureReason = 'no_secret' | 'missing_signature' | 'invalid_signature' | 'timestamp_out_of_tolerance' | 'invalid_payload';

export interface RefusedDelivery {
  ok: false;
  reason: VerifyFailureReason;
}

export type VerifyDeliveryResult = VerifiedDelivery | RefusedDelivery;

/** Header names, lower-case. */
const SVC = 'x-svc-signature';
const SVC_PREVIOUS = 'x-svc-signature-anterior';
const STD_ID = 'webhook-id';
const STD_TIMESTAMP = 'webhook-timestamp';
const STD_SIGNATURE = 'webhook-signature';
const V1_ENTRY = /^v1,([A-Za-z0-9+/]+={0,2})$/;
const SECONDS = /^\d{1,15}$/;

function header(headers: DeliveryHeaders, name: string): string | undefined {
  if (typeof headers.get === 'function') {
    const value = (headers as { get(name: string): string | null }).get(name);
    return value ?? undefined;
  }
  const record = headers as Record<string, string | string[] | undefined>;
  let value = record[name];
  if (value === undefined) {
    const key = Object.keys(record).find((k) => k.toLowerCase() === name);
    value = key === undefined ? undefined : record[key];
  }
  if (Array.isArray(value)) return value.length === 0 ? undefined : value.join(' ');
  return value;
}

function parsePayload(rawBody: string | Buffer): DeliveryPayload | undefined {
  try {
    const parsed: unknown = JSON.parse(typeof rawBody === 'string' ? rawBody : rawBody.toString('utf8'));
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return undefined;
    const p = parsed as Record<string, unknown>;
    if (typeof p.event !== 'string' || typeof p.timestamp !== 'string') return undefined;
    return parsed as DeliveryPayload;
  } catch {
    return undefined;
  }
}

/** Index of the first secret whose X-SVC signature matches one of the values, or -1. */
function matchSvc(rawBody: string | Buffer, values: string[], secrets: Secret[]): number {
  let found = -1;
  // Every pair is checked (no early exit), so the time taken does not say which secret matched.
  for (const { secret, index } of secrets) {
    for (const value of values) {
      if (verify(rawBody, value, secret) && found === -1) found = index;
    }
  }
  return found;
}

/** Index of the first secret with a matching `v1,` entry of webhook-signature, or -1. */
function matchStandard(rawBody: string | Buffer, id: string, seconds: string, signatures: string, secrets: Secret[]): number {
  const received = signatures
    .split(' ')
    .map((entry) => V1_ENTRY.exec(entry)?.[1])
    .filter((b64): b64 is string => b64 !== undefined)
    .map((b64) => Buffer.from(b64, 'base64'))
    .filter((bytes) => bytes.length === 32);
  let found = -1;
  for (const { secret, index } of secrets) {
    const mac = createHmac('sha256', standardKey(secret));
    mac.update(`${id}.${seconds}.`, 'utf8');
    mac.update(rawBody);
    const expected = mac.digest();
    for (const signature of received) {
      if (timingSafeEqual(signature, expected) && found === -1) found = index;
    }
  }
  return found;
}

/** A non-empty secret and its index in the list given. */
interface Secret {
  secret: string;
  index: number;
}

function nowMs(now: Date | number | undefined): number {
  if (now === undefined) return Date.now();
  return typeof now === 'number' ? now : now.getTime();
}

export function verifyDelivery(input: VerifyDeliveryInput): VerifyDeliveryResult {
  const tolerance = input.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
  if (typeof tolerance !== 'number' || !Number.isFinite(tolerance) || tolerance < 0) {
    throw new TypeError(`toleranceSeconds must be a finite number >= 0, got ${String(tolerance)}`);
  }
  const secrets: Secret[] = (typeof input.secrets === 'string' ? [input.secrets] : [...input.secrets])
    .map((secret, index) => ({ secret, index }))
    .filter(({ secret }) => typeof secret === 'string' && secret !== '');
  if (secrets.length === 0) return { ok: false, reason: 'no_secret' };

  const { rawBody, headers } = input;
  const svcValues = [header(headers, SVC), header(headers, SVC_PREVIOUS)].filter((v): v is string => v !== undefined && v !== '');
  const stdSignature = header(headers, STD_SIGNATURE);
  const stdId = header(headers, STD_ID);
  const stdTimestamp = header(headers, STD_TIMESTAMP);
  if (svcValues.length === 0 && (stdSignature === undefined || stdSignature === '')) return { ok: false, reason: 'missing_signature' };

  const current = nowMs(input.now);
  const within = (signedMs: number): boolean => Math.abs(current - signedMs) <= tolerance * 1000;
  // A matching signature whose time or body is refused: kept, in case the other scheme verifies.
  let refusal: VerifyFailureReason = 'invalid_signature';

  if (svcValues.length > 0) {
    const index = matchSvc(rawBody, svcValues, secrets);
    if (index !== -1) {
      const payload = parsePayload(rawBody);
      const signedMs = payload === undefined ? Number.NaN : Date.parse(payload.timestamp);
      if (payload === undefined || Number.isNaN(signedMs)) refusal = 'invalid_payload';
      else if (!within(signedMs)) refusal = 'timestamp_out_of_tolerance';
      else return { ok: true, scheme: 'svc', event: payload.event, payload, signedAt: new Date(signedMs), secretIndex: index };
    }
  }

  if (stdSignature !== undefined && stdId !== undefined && stdTimestamp !== undefined && SECONDS.test(stdTimestamp)) {
    const index = matchStandard(rawBody, stdId, stdTimestamp, stdSignature, secrets);
    if (index !== -1) {
      const signedMs = Number(stdTimestamp) * 1000;
      const payload = parsePayload(rawBody);
      if (!within(signedMs)) refusal = 'timestamp_out_of_tolerance';
      else if (payload === undefined) refusal = refusal === 'invalid_signature' ? 'invalid_payload' : refusal;
      else return { ok: true, scheme: 'standard', event: payload.event, payload, signedAt: new Date(signedMs), secretIndex: index };
    }
  }

  return { ok: false, reason: refusal };
}
