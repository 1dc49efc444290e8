import { createHmac, randomBytes } from 'node:crypto';
import { AppError } from '@svc/contracts';
import type { Db } from '@svc/platform';
import { hashToken, safeEqual } from '../auth/token';
import { requireCompany } from '../companies/company.service';
import { endCompanySessions, insertLink, insertSession, pruneCompany, takeLink, touchSession, type PortalSessionRow } from './portal-session.repository';
import { recordPortalActivity } from './portal-activity';

/** A session ends after this long without a request (docs/portal.md). */
export const PORTAL_IDLE_MS = 30 * 60_000;
/** ...and this long after it began, used or not (docs/portal.md). */
export const PORTAL_ABSOLUTE_MS = 8 * 3600_000;
/** The path the built app and its API live under: the cookie's Path. */
export const PORTAL_PATH = '/portal';
/** Where a link sends the person; the secret follows in the fragment, which no server or log sees. */
export const PORTAL_ENTRY_PATH = `${PORTAL_PATH}/entrar`;
export const SESSION_COOKIE = 'svc_portal';
export const CSRF_HEADER = 'X-CSRF-Token';

/** 32 random bytes in URL-safe text: a link's or a session's secret. */
const newSecret = (): string => randomBytes(32).toString('base64url');

/**
 * The anti-CSRF token of a session: derived from the session's secret, so it is stored nowhere and
 * a page that can read it can only be the portal's own (the cookie is HttpOnly; another origin cannot
 * read the API's answers).
 */
export function csrfTokenOf(sessionSecret: string): string {
  return createHmac('sha256', sessionSecret).update('svc-portal-csrf').digest('base64url');
}

export function csrfMatches(sessionSecret: string, presented: string | undefined): boolean {
  return presented !== undefined && safeEqual(presented, csrfTokenOf(sessionSecret));
}

export const SESSION_ENDED_MESSAGE = 'la sesión del portal terminó o no es válida; el sitio del courier puede darle un enlace nuevo';
const LINK_INVALID_MESSAGE = 'el enlace del portal no es válido: ya se usó o expiró; el sitio del courier puede darle uno nuevo';

/**
 * A single-use link to the portal for the company's `usuario` (the internal route): its secret is
 * returned once, in the URL's fragment, and only its hash is kept.
 */
export async function issuePortalLink(
  db: Db,
  input: { empresaId: string; usuario: string; origin: string; ttlSeconds: number; now: Date },
): Promise<{ url: string; expiraEn: string }> {
  const empresa = await requireCompany(db, input.empresaId);
  const secret = newSecret();
  const expiraEn = new Date(input.now.getTime() + input.ttlSeconds * 1000);
  await pruneCompany(db, empresa.id, new Date(input.now.getTime() - PORTAL_ABSOLUTE_MS));
  await insertLink(db, { empresaId: empresa.id, usuario: input.usuario, hash: hashToken(secret), expiraEn });
  return { url: `${input.origin}${PORTAL_ENTRY_PATH}#${secret}`, expiraEn: expiraEn.toISOString() };
}

export interface StartedSession {
  session: PortalSessionRow;
  /** The cookie's value, set once and never stored. */
  secret: string;
}

/**
 * Trades a link's secret for a session (once), or 401 AUTH_REQUIRED for a used, expired or unknown
 * link. The session's start is in the activity log (`session.started`, the link's `usuario`), written
 * in the same transaction.
 */
export async function startPortalSession(db: Db, linkSecret: string, now: Date): Promise<StartedSession> {
  const secret = newSecret();
  const session = await db.transaction().execute(async (trx) => {
    const link = await takeLink(trx, hashToken(linkSecret), now);
    if (!link) return undefined;
    const started = await insertSession(trx, { ...link, hash: hashToken(secret), now, expiraEn: new Date(now.getTime() + PORTAL_ABSOLUTE_MS) });
    await recordPortalActivity(trx, started, 'session.started');
    return started;
  });
  if (!session) throw new AppError('AUTH_REQUIRED', LINK_INVALID_MESSAGE);
  return { session, secret };
}

/** The open session of a cookie's secret, touched now; 401 AUTH_REQUIRED when there is none. */
export async function requirePortalSession(db: Db, secret: string | undefined, now: Date): Promise<PortalSessionRow> {
  const session = secret === undefined ? undefined : await touchSession(db, hashToken(secret), now, PORTAL_IDLE_MS);
  if (!session) throw new AppError('AUTH_REQUIRED', SESSION_ENDED_MESSAGE);
  return session;
}

/** The operator's DELETE: every open session of the company ends now (its unused links too). */
export async function endPortalSessions(db: Db, empresaId: string, now: Date): Promise<number> {
  const empresa = await requireCompany(db, empresaId);
  return endCompanySessions(db, empresa.id, now);
}
