import type { RequestHandler } from 'express';
import type { Logger } from '@svc/observability';
import { AppError } from '@svc/contracts';
import type { Db } from '@svc/platform';
import type { AdminAuthLimiter } from './admin-auth.limiter';
import type { AuthFailureLimiter, FailureStanding } from './auth-failure.limiter';
import type { ClientAddress } from '../http/client-address';
import { ADMIN_TOKEN_CHARS } from '../config';
import { hashToken, TOKEN_FORMAT } from './token';
import type { TokenCache } from './token-cache';
import { findPrincipalByHash } from './token.repository';
import type { AuthEvents } from './auth-events';

const unauthorized = (why: string): AppError => new AppError('AUTH_REQUIRED', why);

// RFC 9110 §11.1: the scheme is case-insensitive, separated from the credentials by spaces or tabs.
const BEARER = /^[ \t]*bearer[ \t]+(\S+)[ \t]*$/i;

/** The credentials of `Bearer <value>`, or undefined when the header is not of the Bearer scheme. */
export function bearerValue(header: string): string | undefined {
  return BEARER.exec(header)?.[1];
}

/** Past an address's limit of failed authentications: the same envelope as any rate limit. */
function addressHeld(standing: FailureStanding, what: string): AppError {
  return new AppError('RATE_LIMIT_EXCEEDED', `too many ${what} from this address; retry later`, {
    'Retry-After': String(standing.retryAfterSeconds),
  });
}

export interface AuthenticateOptions {
  /** Failed authentications per client address, checked before a lookup the cache cannot answer. */
  failures: AuthFailureLimiter;
  clientAddress: ClientAddress;
}

/**
 * The contract's steps 1-7: bearer value → its format → SHA-256 → cache (60 s) → stored hashes.
 * A token the cache knows as valid costs nothing more. Any other well-formed one is first checked
 * against its client address's failures (429 past the limit, before any lookup), and a token that
 * matches none counts one more, so a caller minting random tokens gets a bounded number of
 * Postgres lookups per address and minute, on every gateway alike (the count is in Redis).
 */
export function authenticate(db: Db, cache: TokenCache, events: AuthEvents, options: AuthenticateOptions): RequestHandler {
  const { failures, clientAddress } = options;
  return async (req, _res, next) => {
    const header = req.headers.authorization;
    if (!header) {
      events.failure('missing');
      throw unauthorized('the Authorization header is required: Bearer <API_TOKEN>');
    }
    const value = bearerValue(header);
    if (value === undefined) {
      events.failure(/^[ \t]*bearer(?:[ \t]|$)/i.test(header) ? 'invalid' : 'scheme');
      throw unauthorized('the Authorization header must be Bearer <API_TOKEN>');
    }
    // What no issued token looks like costs no hash, cache entry or database lookup.
    if (!TOKEN_FORMAT.test(value)) {
      events.failure('invalid');
      throw unauthorized('the token is invalid or unknown');
    }
    const hash = hashToken(value);
    let principal = cache.get(hash);
    if (principal) {
      events.cache('hit');
    } else {
      const address = clientAddress(req);
      const standing = await failures.check(address);
      if (standing.held) {
        events.addressLimited('api');
        throw addressHeld(standing, 'failed authentications');
      }
      if (principal === undefined) {
        events.cache('miss');
        const epoch = cache.currentEpoch();
        principal = (await findPrincipalByHash(db, hash)) ?? null;
        cache.set(hash, principal, epoch);
      } else {
        events.cache('hit');
      }
      if (!principal) {
        events.failure('invalid');
        await failures.failed(address);
        throw unauthorized('the token is invalid or unknown');
      }
    }
    req.principal = principal;
    next();
  };
}

export interface AdminGuardOptions {
  /** ADMIN_TOKEN; unset = every internal route answers 401. */
  token: string | undefined;
  /** A constant-time comparison. */
  compare: (a: string, b: string) => boolean;
  limiter: AdminAuthLimiter;
  clientAddress: ClientAddress;
  events: Pick<AuthEvents, 'adminFailure'>;
  logger: Logger;
}

/**
 * The internal routes' guard: `Bearer <ADMIN_TOKEN>`, compared in constant time; unset = closed.
 * The right token always passes, uncounted and without asking Redis: nobody's failures, however
 * many or from wherever, refuse it. A wrong one is counted per client address (AdminAuthLimiter):
 * past the limit it is answered 429 until the window ends, and every one is counted on the metric
 * that the AdminTokenGuessing alert watches. What cannot be the token (no header, another scheme,
 * characters no ADMIN_TOKEN has) is refused at once, uncounted: it is no guess, and a refusal
 * written in the request's own tick reaches even a request line Node drops the socket after (a
 * `PRI` line, which the parser fuzz sends). Every failure is logged at warn level with the client's
 * address, never the value.
 */
export function adminOnly(options: AdminGuardOptions): RequestHandler {
  const { token, compare, limiter, clientAddress, events, logger } = options;
  const wrong = async (where: { address: string }): Promise<never> => {
    const standing = await limiter.failed(where.address);
    if (standing.held) {
      events.adminFailure('limited');
      // Once per window: the guess that used it up says the address is held; the rest would repeat it.
      if (standing.failures === limiter.limit + 1) logger.warn({ ...where, limit: limiter.limit }, 'admin authentication limited');
      throw addressHeld(standing, 'failed admin authentications');
    }
    events.adminFailure('wrong');
    logger.warn({ ...where, reason: 'wrong', failures: standing.failures }, 'admin authentication failed');
    throw unauthorized('a valid admin token is required');
  };
  // Not an async function: the refusals that need no Redis are thrown in the request's own tick.
  return (req, _res, next) => {
    // Closed: nothing to guess, nothing to count (each start already warns that it is unset).
    if (!token) throw unauthorized('a valid admin token is required');
    const header = req.headers.authorization;
    const value = header === undefined ? undefined : bearerValue(header);
    if (value !== undefined && ADMIN_TOKEN_CHARS.test(value) && compare(value, token)) {
      next();
      return;
    }
    const where = { address: clientAddress(req), requestId: req.requestId, method: req.method, path: req.path };
    if (value === undefined || !ADMIN_TOKEN_CHARS.test(value)) {
      const reason = header === undefined ? 'missing' : value === undefined ? 'scheme' : 'malformed';
      events.adminFailure(reason);
      logger.warn({ ...where, reason }, 'admin authentication failed');
      throw unauthorized('a valid admin token is required');
    }
    return wrong(where);
  };
}
