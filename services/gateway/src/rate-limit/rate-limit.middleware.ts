import type { Request, RequestHandler, Response } from 'express';
import { AppError } from '@svc/contracts';
import type { TokenCache } from '../auth/token-cache';
import type { AuthEvents } from '../auth/auth-events';
import type { RateLimiter } from './rate-limiter';

function setHeaders(res: Response, limit: number, remaining: number, resetSeconds: number): void {
  res.setHeader('X-RateLimit-Limit', String(limit));
  res.setHeader('X-RateLimit-Remaining', String(remaining));
  res.setHeader('X-RateLimit-Reset', String(resetSeconds));
}

/**
 * Put before authentication: a request that fails it is counted against no token, yet its answer
 * still carries the three headers (a full, untouched window).
 */
export function defaultRateHeaders(limit: number): RequestHandler {
  return (_req, res, next) => {
    setHeaders(res, limit, limit, Math.ceil(Date.now() / 1000));
    next();
  };
}

export interface RateLimitEvents {
  rejected(): void;
}

/**
 * Says whether a request is one the limit leaves uncounted (it is let through with the window as it
 * stands): `svc listen`'s answer to an attempt the platform made and waits for. Whatever it
 * decides, its own check must be bounded by the platform's work, never by the caller's requests.
 */
export type UncountedRequest = (req: Request) => Promise<boolean>;

/** After authentication: counts the request in the token's window, or answers 429. */
export function rateLimit(
  limiter: RateLimiter,
  cache: TokenCache,
  authEvents: AuthEvents,
  events: RateLimitEvents,
  uncounted?: UncountedRequest,
): RequestHandler {
  return async (req, res, next) => {
    const principal = req.principal;
    if (!principal) throw new AppError('AUTH_REQUIRED', 'authentication is required');
    const mode = uncounted !== undefined && (await uncounted(req)) ? 'peek' : 'count';
    const decision = await limiter.hit(principal.tokenId, cache.revokedKey(principal.tokenHash), principal.tokenHash, mode);
    if (decision.revoked) {
      cache.delete(principal.tokenHash);
      authEvents.failure('revoked');
      throw new AppError('AUTH_REQUIRED', 'the token is invalid or unknown');
    }
    setHeaders(res, decision.limit, decision.remaining, decision.resetSeconds);
    if (!decision.allowed) {
      events.rejected();
      throw new AppError('RATE_LIMIT_EXCEEDED', `rate limit of ${decision.limit} requests per minute reached`, {
        'Retry-After': String(decision.retryAfterSeconds),
      });
    }
    next();
  };
}
