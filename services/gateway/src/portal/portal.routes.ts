import type { Router } from 'express';
import { validatePortalSessionRequest, type Empresa } from '@svc/contracts';
import type { GatewayDeps } from '../deps';
import { jsonBody } from '../http/body.middleware';
import { route } from '../http/route-table';
import { sendData } from '../http/send-json';
import type { RateLimiter } from '../rate-limit/rate-limiter';
import { requireCompany } from '../companies/company.service';
import { clearSessionCookie, endBrowserSession, portalSession, sessionOf, setSessionCookie } from './portal-session.middleware';
import { csrfTokenOf, PORTAL_IDLE_MS, startPortalSession } from './portal-session.service';
import { endSession } from './portal-session.repository';
import { mountPortalSummaryRoutes } from './portal-summary.routes';
import { mountPortalTokenRoutes } from './portal-tokens.routes';
import { mountPortalWebhookRoutes } from './portal-webhooks.routes';
import { mountPortalBranchRoutes } from './portal-branches.routes';
import { mountPortalActivityRoutes } from './portal-activity.routes';
import { mountPortalSandboxRoutes } from './portal-sandbox.routes';

/**
 * The customer portal's API under `/portal/v1` (docs/portal.md): the session's exchange, then, behind
 * the session's guard, one mount per page. Where a page does what `/api/v1` does, it runs the API's
 * own handlers for the session's caller (portal-caller.ts); its own routes call the features'
 * services. Every action is in the activity log once, with the link's `usuario`: the services write
 * it in the action's own transaction (the session's start: `startPortalSession`).
 */
export function mountPortalRoutes(router: Router, deps: GatewayDeps, limiter: RateLimiter): void {
  const guard = portalSession(deps, limiter);

  route(router, '/sesion', {
    post: [
      jsonBody,
      async (req, res) => {
        const { enlace } = validatePortalSessionRequest(req.body);
        const now = deps.clock.now();
        const { session, secret } = await startPortalSession(deps.db, enlace, now);
        await endBrowserSession(deps.db, req, now);
        setSessionCookie(req, res, secret);
        const empresa = await requireCompany(deps.db, session.empresaId);
        sendData(res, 201, sessionView(empresa, { ...session, secret }));
      },
    ],
    get: [
      guard,
      async (req, res) => {
        const s = sessionOf(req);
        sendData(res, 200, sessionView(await requireCompany(deps.db, s.empresaId), s));
      },
    ],
    delete: [
      guard,
      async (req, res) => {
        await endSession(deps.db, sessionOf(req).id, deps.clock.now());
        clearSessionCookie(req, res);
        sendData(res, 200, { cerrada: true });
      },
    ],
  });

  router.use(guard, jsonBody);
  mountPortalSummaryRoutes(router, deps);
  mountPortalTokenRoutes(router, deps);
  mountPortalWebhookRoutes(router, deps);
  mountPortalBranchRoutes(router, deps);
  mountPortalActivityRoutes(router, deps);
  mountPortalSandboxRoutes(router, deps);
}

/** The session as the page needs it: who, for which company, until when, and its anti-CSRF token. */
function sessionView(e: Empresa, s: { usuario: string; expiraEn: Date; secret: string }) {
  return {
    usuario: s.usuario,
    expiraEn: s.expiraEn.toISOString(),
    inactividadSegundos: PORTAL_IDLE_MS / 1000,
    csrfToken: csrfTokenOf(s.secret),
    empresa: { id: e.id, nombre: e.nombre, verificada: e.verificada, sucursalesHabilitadas: e.sucursales_habilitadas },
  };
}
