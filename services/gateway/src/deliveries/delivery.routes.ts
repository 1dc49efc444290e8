import type { Router } from 'express';
import { validateRecoveryRequest } from '@svc/contracts';
import type { GatewayDeps } from '../deps';
import { route } from '../http/route-table';
import { sendJson } from '../http/send-json';
import { principalOf } from '../http/request-principal';
import { scopeOf } from '../companies/company-scope';
import { requireHead } from '../webhooks/webhook.service';
import { deliveryDetail, deliveryLog, recoverDeliveries, resendDelivery } from './delivery.service';
import { API_USER } from '../activity/activity.repository';

/**
 * What extensions.md adds under a webhook: its delivery log and one delivery's detail, readable by
 * every token that reads the webhook's detail; resending one delivery and recovering a window of
 * failed ones, the head account's (403 FORBIDDEN for a branch token), each in the activity log as
 * API_USER's.
 */
export function mountDeliveryRoutes(router: Router, deps: GatewayDeps): void {
  route(router, '/webhooks/:id/entregas', {
    get: async (req, res) => {
      const data = await deliveryLog(deps, scopeOf(principalOf(req)), String(req.params.id), req.query as Record<string, unknown>);
      sendJson(res, 200, { success: true, data });
    },
  });

  route(router, '/webhooks/:id/entregas/:entregaId', {
    get: async (req, res) => {
      const data = await deliveryDetail(deps, scopeOf(principalOf(req)), String(req.params.id), String(req.params.entregaId));
      sendJson(res, 200, { success: true, data });
    },
  });

  route(router, '/webhooks/:id/entregas/:entregaId/reenviar', {
    post: async (req, res) => {
      const principal = principalOf(req);
      requireHead(principal);
      const data = await resendDelivery(deps, scopeOf(principal), String(req.params.id), String(req.params.entregaId), req.requestId, API_USER);
      sendJson(res, 202, { success: true, data });
    },
  });

  route(router, '/webhooks/:id/recuperar', {
    post: async (req, res) => {
      const principal = principalOf(req);
      requireHead(principal);
      const body = validateRecoveryRequest(req.body);
      const data = await recoverDeliveries(deps, scopeOf(principal), String(req.params.id), body, deps.clock.now(), req.requestId, API_USER);
      sendJson(res, 202, { success: true, data });
    },
  });
}
