import type { RedisClient, RedisKeys } from '@svc/platform';
import { AuthFailureLimiter } from './auth-failure.limiter';

/**
 * Wrong admin tokens a client address may present per window before they are answered 429 until
 * the window ends (and counted on `svc_admin_auth_failures_total`). An operator mistypes a few
 * times; a guesser keeps going, which the 429s and the alert on the metric make plain.
 */
export const ADMIN_AUTH_FAILURES_PER_WINDOW = 10;
/** The window of that count, from an address's first failure. */
export const ADMIN_AUTH_WINDOW_MS = 60_000;

/**
 * Wrong admin tokens per client address. The right token is never counted nor checked against the
 * count (`adminOnly`): one client's guesses, or many behind one address, cannot lock the operator
 * out. The limit slows a guesser's answers to 401s and says so (429, the metric, the alert); what
 * makes guessing hopeless is the token's length and entropy, which production enforces (config.ts).
 */
export class AdminAuthLimiter extends AuthFailureLimiter {
  constructor(redis: RedisClient, keys: RedisKeys, limit = ADMIN_AUTH_FAILURES_PER_WINDOW, windowMs = ADMIN_AUTH_WINDOW_MS) {
    super(redis, keys, limit, windowMs, 'admin:auth');
  }
}

/**
 * Failed authentications on `/api/v1` (well-formed tokens that match none) per client address and
 * window, before any further lookup: past it, 429 until the window ends. As many as the contract's
 * requests per token per minute: a client retrying a revoked token stays far below it, while a
 * caller minting random tokens gets at most this many lookups a minute per address.
 */
export const API_AUTH_FAILURES_PER_WINDOW = 100;
export const API_AUTH_WINDOW_MS = 60_000;
