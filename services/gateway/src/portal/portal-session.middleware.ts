import type { Request, RequestHandler, Response } from 'express';
import { AppError } from '@svc/contracts';
import type { Db } from '@svc/platform';
import type { GatewayDeps } from '../deps';
import { hashToken } from '../auth/token';
import type { RateLimiter } from '../rate-limit/rate-limiter';
import { CSRF_HEADER, csrfMatches, PORTAL_ABSOLUTE_MS, PORTAL_IDLE_MS, PORTAL_PATH, requirePortalSession, SESSION_COOKIE } from './portal-session.service';
import { endSession, touchSession } from './portal-session.repository';

/** The session a portal request runs under: every portal handler reads the company and `usuario` here. */
export interface PortalSession {
  id: string;
  empresaId: string;
  /** Who the link was for: the activity log's `usuario`. */
  usuario: string;
  expiraEn: Date;
  /** The cookie's secret, from which the anti-CSRF token derives. */
  secret: string;
}

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Request {
      portalSession?: PortalSession;
    }
  }
}

/** The session of a request that passed `portalSession()`. */
export function sessionOf(req: Request): PortalSession {
  const s = req.portalSession;
  if (!s) throw new AppError('AUTH_REQUIRED', 'a portal session is required');
  return s;
}

/**
 * One cookie's value from the `Cookie` header; of several with that name, the last. A browser
 * sends cookies of longer paths first and, among equal paths, the older first: the last is the
 * one this portal set most recently, never one planted with a narrower path to be read first.
 */
export function cookieValue(header: string | undefined, name: string): string | undefined {
  if (header === undefined) return undefined;
  let found: string | undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) {
      const value = part.slice(eq + 1).trim();
      found = /^[A-Za-z0-9_-]{1,100}$/.test(value) ? value : undefined;
    }
  }
  return found;
}

const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]']);

/** docs/portal.md: `Secure` except for plain HTTP to localhost (a loopback name or address). */
function isPlainLocalhost(req: Request): boolean {
  if (req.secure) return false;
  const host = (req.headers.host ?? '').toLowerCase().replace(/:\d+$/, '');
  return LOOPBACK.has(host) || host.endsWith('.localhost');
}

function cookie(req: Request, value: string, maxAgeSeconds: number): string {
  const attrs = [`${SESSION_COOKIE}=${value}`, `Path=${PORTAL_PATH}`, `Max-Age=${maxAgeSeconds}`, 'HttpOnly', 'SameSite=Strict'];
  if (!isPlainLocalhost(req)) attrs.push('Secure');
  return attrs.join('; ');
}

/**
 * When a browser redeems a new link, the session its cookie still names ends (one browser, one
 * session): the new cookie replaces the old, and the old session must not stay open unseen.
 */
export async function endBrowserSession(db: Db, req: Request, now: Date): Promise<void> {
  const secret = cookieValue(req.headers.cookie, SESSION_COOKIE);
  if (secret === undefined) return;
  const previous = await touchSession(db, hashToken(secret), now, PORTAL_IDLE_MS);
  if (previous) await endSession(db, previous.id, now);
}

export function setSessionCookie(req: Request, res: Response, secret: string): void {
  res.setHeader('Set-Cookie', cookie(req, secret, PORTAL_ABSOLUTE_MS / 1000));
}

export function clearSessionCookie(req: Request, res: Response): void {
  res.setHeader('Set-Cookie', cookie(req, '', 0));
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * A change from another origin is refused before anything else: a browser names the page that sent
 * it in `Origin`, which must be this very host (the anti-CSRF token is the main guard; this one
 * costs nothing).
 */
function sameOrigin(req: Request): boolean {
  const origin = req.headers.origin;
  if (origin === undefined) return true;
  try {
    return new URL(origin).host === req.headers.host;
  } catch {
    return false;
  }
}

/**
 * The portal's guard, in order: a change must come from this origin; the cookie's session must be
 * open (touched now: 30 minutes idle, 8 hours in all); a change must carry the session's anti-CSRF
 * token in `X-CSRF-Token`; then the session's own rate limit (the gateway's sliding window, per
 * session). A session that ended is 401 AUTH_REQUIRED, and its cookie is cleared.
 */
export function portalSession(deps: Pick<GatewayDeps, 'db' | 'clock' | 'config'>, limiter: RateLimiter): RequestHandler {
  return async (req, res, next) => {
    const changes = !SAFE_METHODS.has(req.method);
    if (changes && !sameOrigin(req)) throw new AppError('FORBIDDEN', 'la petición no viene del portal (Origin de otro sitio)');
    const secret = cookieValue(req.headers.cookie, SESSION_COOKIE);
    let row;
    try {
      row = await requirePortalSession(deps.db, secret, deps.clock.now());
    } catch (err) {
      if (err instanceof AppError && secret !== undefined) clearSessionCookie(req, res);
      throw err;
    }
    if (changes && !csrfMatches(secret!, headerOf(req, CSRF_HEADER))) {
      throw new AppError('FORBIDDEN', `falta el token anti-CSRF de la sesión (cabecera ${CSRF_HEADER}) o no es válido`);
    }
    // The key it checks is never set: sessions end in Postgres, which every request reads above.
    const decision = await limiter.hit(`portal:${row.id}`, limiter.keys.of('portal:revoked', row.id), row.id);
    if (!decision.allowed) {
      throw new AppError('RATE_LIMIT_EXCEEDED', `límite de ${decision.limit} peticiones por minuto de la sesión alcanzado`, {
        'Retry-After': String(decision.retryAfterSeconds),
      });
    }
    req.portalSession = { id: row.id, empresaId: row.empresaId, usuario: row.usuario, expiraEn: row.expiraEn, secret: secret! };
    next();
  };
}

function headerOf(req: Request, name: string): string | undefined {
  const v = req.headers[name.toLowerCase()];
  return typeof v === 'string' ? v : undefined;
}
