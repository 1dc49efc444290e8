import type { RequestHandler, Router } from 'express';
import { validateRecoveryRequest } from '@svc/contracts';
import type { GatewayDeps } from '../deps';
import { route } from '../http/route-table';
import { sendData } from '../http/send-json';
import { apiDoor, type Door } from '../companies/company-scope';
import { requireHead } from '../webhooks/webhook.service';
import { deliveryDetail, deliveryLog, recoverDeliveries, resendDelivery } from './delivery.service';

/**
 * What a webhook's deliveries offer, as route handlers for the caller its door names (`/api/v1`'s
 * token or the portal's session): the delivery log and one delivery's detail, readable by every
 * caller that reads the webhook's detail; resending one delivery and recovering a window of failed
 * ones, the head account's (403 FORBIDDEN for a branch token), each in the activity log as the
 * caller's `usuario`.
 */
export function deliveryHandlers(deps: GatewayDeps, door: Door) {
  const log: RequestHandler = async (req, res) => {
    sendData(res, 200, await deliveryLog(deps, door.scope(req), String(req.params.id), req.query as Record<string, unknown>));
  };
  const detail: RequestHandler = async (req, res) => {
    sendData(res, 200, await deliveryDetail(deps, door.scope(req), String(req.params.id), String(req.params.entregaId)));
  };
  const resend: RequestHandler = async (req, res) => {
    const caller = door.caller(req);
    requireHead(caller);
    const data = await resendDelivery(deps, door.scope(req), String(req.params.id), String(req.params.entregaId), req.requestId, caller.usuario);
    sendData(res, 202, data);
  };
  const recover: RequestHandler = async (req, res) => {
    const caller = door.caller(req);
    requireHead(caller);
    const body = validateRecoveryRequest(req.body);
    const data = await recoverDeliveries(deps, door.scope(req), String(req.params.id), body, deps.clock.now(), req.requestId, caller.usuario);
    sendData(res, 202, data);
  };
  return { log, detail, resend, recover };
}

/** A webhook's delivery log, one delivery, its resend and the recovery of a window, under `/api/v1` (docs/integrators.md). */
export function mountDeliveryRoutes(router: Router, deps: GatewayDeps): void {
  const h = deliveryHandlers(deps, apiDoor);
  route(router, '/webhooks/:id/entregas', { get: h.log });
  route(router, '/webhooks/:id/entregas/:entregaId', { get: h.detail });
  route(router, '/webhooks/:id/entregas/:entregaId/reenviar', { post: h.resend });
  route(router, '/webhooks/:id/recuperar', { post: h.recover });
}
