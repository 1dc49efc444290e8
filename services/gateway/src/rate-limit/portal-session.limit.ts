import type { RequestHandler } from 'express';
import { AppError } from '@svc/contracts';
import type { ClientAddress } from '../http/client-address';
import type { RateLimiter } from './rate-limiter';

/**
 * Portal sessions a client address may start (`POST /portal/v1/sesion`) per sliding minute. A
 * person redeems one link at a time; a few dozen people behind one office address stay below it,
 * while a script trying link secrets gets this many Postgres lookups a minute per address.
 */
export const PORTAL_SESSIONS_PER_MINUTE = 30;

/** Counts every session start of the client's address in Redis (every gateway alike); past the limit, 429. */
export function portalSessionLimit(limiter: RateLimiter, clientAddress: ClientAddress, events: { limited(): void }): RequestHandler {
  return async (req, _res, next) => {
    if (req.method !== 'POST') {
      next();
      return;
    }
    const decision = await limiter.take(clientAddress(req));
    if (!decision.allowed) {
      events.limited();
      throw new AppError('RATE_LIMIT_EXCEEDED', 'too many portal sessions started from this address; retry later', {
        'Retry-After': String(decision.retryAfterSeconds),
      });
    }
    next();
  };
}
