import type { Router } from 'express';
import { validatePortalLinkRequest } from '@svc/contracts';
import type { GatewayDeps } from '../deps';
import { route } from '../http/route-table';
import { sendJson } from '../http/send-json';
import { endPortalSessions, issuePortalLink } from './portal-session.service';

/**
 * How a company's staff get into the portal (docs/portal.md): the courier's website asks for a single-use
 * link for its signed-in `usuario`, and the operator can end every session of a company at once.
 */
export function mountPortalInternalRoutes(router: Router, deps: GatewayDeps): void {
  route(router, '/empresas/:id/portal', {
    post: async (req, res) => {
      const { usuario } = validatePortalLinkRequest(req.body);
      // PORTAL_BASE_URL, else this gateway's public port on localhost: never the port this request
      // came in on, which is ADMIN_PORT when that is set.
      const origin = deps.config.portalBaseUrl ?? `http://localhost:${deps.publicPort()}`;
      const link = await issuePortalLink(deps.db, {
        empresaId: String(req.params.id),
        usuario,
        origin,
        ttlSeconds: deps.config.portalLinkTtlSeconds,
        now: deps.clock.now(),
      });
      sendJson(res, 201, { success: true, data: link });
    },
    delete: async (req, res) => {
      const sesionesTerminadas = await endPortalSessions(deps.db, String(req.params.id), deps.clock.now());
      sendJson(res, 200, { success: true, data: { sesionesTerminadas } });
    },
  });
}
