import type { RequestHandler, Response, Router } from 'express';
import { validateGuiaBatch, validateGuiaCreate, validateGuiaEvento } from '@svc/contracts';
import type { GatewayDeps } from '../deps';
import { route } from '../http/route-table';
import { idempotencyRequest } from '../idempotency/idempotency';
import { createShipments, listPage, simulateTransition, tracking, transitionShipment, type CreateAnswer } from './shipment.service';
import { sendData, sendJson } from '../http/send-json';
import { apiDoor, principalOf, scopeOf, type Door } from '../companies/company-scope';
import { OPERATOR } from '../activity/activity.repository';

function send(res: Response, answer: CreateAnswer): void {
  if (answer.replayed) res.setHeader('Idempotent-Replayed', 'true');
  sendJson(res, answer.status, answer.body);
}

/**
 * The shipment operations that read or move a caller's own shipments, for the caller its door
 * names: `/api/v1`'s token, or the portal's session in its sandbox. Listing, and `simular` (403
 * FORBIDDEN outside the sandbox).
 */
export function shipmentHandlers(deps: GatewayDeps, door: Door) {
  const list: RequestHandler = async (req, res) => {
    sendData(res, 200, await listPage(deps, door.scope(req), req.query as Record<string, unknown>));
  };
  const simulate: RequestHandler = async (req, res) => {
    sendData(res, 200, await simulateTransition(deps, door.scope(req), String(req.params.numeroGuia), req.body, req.requestId));
  };
  return { list, simulate };
}

/** The shipment operations of `/api/v1`: create one or a batch (with Idempotency-Key), list, track, and move a sandbox shipment on (`simular`). */
export function mountShipmentRoutes(router: Router, deps: GatewayDeps): void {
  const h = shipmentHandlers(deps, apiDoor);
  route(router, '/guias', {
    post: async (req, res) => {
      const principal = principalOf(req);
      // Validated first: the key's hash walks the body, which only the schema bounds in depth.
      const item = validateGuiaCreate(req.body);
      const idempotency = idempotencyRequest(req.headers['idempotency-key'], principal.tokenId, 'POST /guias', req.body);
      send(res, await createShipments(deps, { owner: scopeOf(principal), requestId: req.requestId, idempotency }, [item], 'single'));
    },
    get: h.list,
  });

  route(router, '/guias/batch', {
    post: async (req, res) => {
      const principal = principalOf(req);
      const { guias } = validateGuiaBatch(req.body);
      const idempotency = idempotencyRequest(req.headers['idempotency-key'], principal.tokenId, 'POST /guias/batch', req.body);
      send(res, await createShipments(deps, { owner: scopeOf(principal), requestId: req.requestId, idempotency }, guias, 'batch'));
    },
  });

  route(router, '/guias/:numeroGuia/tracking', {
    get: async (req, res) => {
      sendData(res, 200, await tracking(deps, scopeOf(principalOf(req)), String(req.params.numeroGuia)));
    },
  });

  route(router, '/guias/:numeroGuia/simular', { post: h.simulate });
}

/** The courier's operations: `POST /internal/v1/guias/{numeroGuia}/eventos` moves a shipment on. */
export function mountShipmentInternalRoutes(router: Router, deps: GatewayDeps): void {
  route(router, '/guias/:numeroGuia/eventos', {
    post: async (req, res) => {
      const body = validateGuiaEvento(req.body);
      sendData(res, 200, await transitionShipment(deps, String(req.params.numeroGuia), body, req.requestId, undefined, OPERATOR));
    },
  });
}
