import type { Response, Router } from 'express';
import { validateGuiaBatch, validateGuiaCreate, validateGuiaEvento } from '@svc/contracts';
import type { GatewayDeps } from '../deps';
import { route } from '../http/route-table';
import { idempotencyRequest } from '../idempotency/idempotency';
import { createShipments, listPage, simulateTransition, tracking, transitionShipment, type CreateAnswer } from './shipment.service';
import { sendJson } from '../http/send-json';
import { principalOf } from '../http/request-principal';
import { scopeOf } from '../companies/company-scope';
import { OPERATOR } from '../activity/activity.repository';

function send(res: Response, answer: CreateAnswer): void {
  if (answer.replayed) res.setHeader('Idempotent-Replayed', 'true');
  sendJson(res, answer.status, answer.body);
}

/** The shipment operations of `/api/v1`: create one or a batch (with Idempotency-Key), list, track, and move a sandbox shipment on (`simular`). */
export function mountShipmentRoutes(router: Router, deps: GatewayDeps): void {
  route(router, '/guias', {
    post: async (req, res) => {
      const principal = principalOf(req);
      // Validated first: the key's hash walks the body, which only the schema bounds in depth.
      const item = validateGuiaCreate(req.body);
      const idempotency = idempotencyRequest(req.headers['idempotency-key'], principal.tokenId, 'POST /guias', req.body);
      send(res, await createShipments(deps, { principal, requestId: req.requestId, idempotency }, [item], 'single'));
    },
    get: async (req, res) => {
      const data = await listPage(deps, scopeOf(principalOf(req)), req.query as Record<string, unknown>);
      sendJson(res, 200, { success: true, data });
    },
  });

  route(router, '/guias/batch', {
    post: async (req, res) => {
      const principal = principalOf(req);
      const { guias } = validateGuiaBatch(req.body);
      const idempotency = idempotencyRequest(req.headers['idempotency-key'], principal.tokenId, 'POST /guias/batch', req.body);
      send(res, await createShipments(deps, { principal, requestId: req.requestId, idempotency }, guias, 'batch'));
    },
  });

  route(router, '/guias/:numeroGuia/tracking', {
    get: async (req, res) => {
      const data = await tracking(deps, scopeOf(principalOf(req)), String(req.params.numeroGuia));
      sendJson(res, 200, { success: true, data });
    },
  });

  route(router, '/guias/:numeroGuia/simular', {
    post: async (req, res) => {
      const principal = principalOf(req);
      const data = await simulateTransition(deps, principal, String(req.params.numeroGuia), req.body, req.requestId);
      sendJson(res, 200, { success: true, data });
    },
  });
}

/** The courier's operations: `POST /internal/v1/guias/{numeroGuia}/eventos` moves a shipment on. */
export function mountShipmentInternalRoutes(router: Router, deps: GatewayDeps): void {
  route(router, '/guias/:numeroGuia/eventos', {
    post: async (req, res) => {
      const body = validateGuiaEvento(req.body);
      const data = await transitionShipment(deps, String(req.params.numeroGuia), body, req.requestId, undefined, OPERATOR);
      sendJson(res, 200, { success: true, data });
    },
  });
}
