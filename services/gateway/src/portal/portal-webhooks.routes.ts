import type { Router } from 'express';
import type { GatewayDeps } from '../deps';
import { route } from '../http/route-table';
import { sendData } from '../http/send-json';
import { webhookHandlers } from '../webhooks/webhook.routes';
import { listOwnerWebhookViews } from '../webhooks/webhook.service';
import { deliveryHandlers } from '../deliveries/delivery.routes';
import { portalDoor } from './portal-caller';

/**
 * The Webhooks page: every operation is `/api/v1`'s own handler, run for the session's company in
 * the mode `?modo=` names; only the list is the portal's, since it shows inactive webhooks too (the
 * page reactivates them) where the API lists active ones.
 */
export function mountPortalWebhookRoutes(router: Router, deps: GatewayDeps): void {
  const webhooks = webhookHandlers(deps, portalDoor);
  const deliveries = deliveryHandlers(deps, portalDoor);
  route(router, '/webhooks', {
    get: async (req, res) => {
      sendData(res, 200, await listOwnerWebhookViews(deps, portalDoor.scope(req)));
    },
    post: webhooks.create,
  });
  route(router, '/webhooks/:id', { get: webhooks.detail, patch: webhooks.patch, delete: webhooks.remove });
  route(router, '/webhooks/:id/test', { post: webhooks.ping });
  route(router, '/webhooks/:id/salud', { get: webhooks.health });
  route(router, '/webhooks/:id/secreto', { post: webhooks.rotateSecret });
  route(router, '/webhooks/:id/entregas', { get: deliveries.log });
  route(router, '/webhooks/:id/entregas/:entregaId', { get: deliveries.detail });
  route(router, '/webhooks/:id/entregas/:entregaId/reenviar', { post: deliveries.resend });
  route(router, '/webhooks/:id/recuperar', { post: deliveries.recover });
}
