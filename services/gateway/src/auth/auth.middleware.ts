import type { RequestHandler } from 'express';
import { AppError, type Db } from '@svc/schema';
import { hashToken, TOKEN_PREFIX } from './token';
import type { TokenCache } from './token-cache';
import { findPrincipalByHash } from './token.repository';
import type { AuthEvents } from './auth-events';

const PREFIXES = [TOKEN_PREFIX.live, TOKEN_PREFIX.test];
const unauthorized = (why: string): AppError => new AppError('AUTH_REQUIRED', why);

// RFC 9110 §11.1: the scheme is case-insensitive, separated from the credentials by spaces or tabs.
const BEARER = /^[ \t]*bearer[ \t]+(\S+)[ \t]*$/i;

/** The credentials of `Bearer <value>`, or undefined when the header is not of the Bearer scheme. */
export function bearerValue(header: string): string | undefined {
  return BEARER.exec(header)?.[1];
}

/** The contract's steps 1-7: bearer value → SHA-256 → cache (60 s) → stored hashes. */
export function authenticate(db: Db, cache: TokenCache, events: AuthEvents): RequestHandler {
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
    if (!PREFIXES.some((p) => value.startsWith(p))) {
      events.failure('invalid');
      throw unauthorized('the token is invalid or unknown');
    }
    const hash = hashToken(value);
    let principal = cache.get(hash);
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
      throw unauthorized('the token is invalid or unknown');
    }
    req.principal = principal;
    next();
  };
}

/** The internal routes' guard: `Bearer <ADMIN_TOKEN>`, compared in constant time; unset = closed. */
export function adminOnly(adminToken: string | undefined, compare: (a: string, b: string) => boolean): RequestHandler {
  return (req, _res, next) => {
    const header = req.headers.authorization;
    const value = header === undefined ? undefined : bearerValue(header);
    if (!adminToken || value === undefined || !compare(value, adminToken)) {
      throw unauthorized('a valid admin token is required');
    }
    next();
  };
}
