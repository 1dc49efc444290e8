import type { RequestHandler, Router } from 'express';
import { validateSecretRotation, validateWebhookCreate, validateWebhookPatch } from '@svc/contracts';
import type { GatewayDeps } from '../deps';
import { route } from '../http/route-table';
import { requireCompany, requireBranch } from '../companies/company.service';
import {
  createWebhook,
  deleteWebhook,
  listWebhooks,
  patchWebhook,
  pingWebhook,
  requireHead,
  rotateWebhookSecret,
  webhookDetail,
  webhookHealth,
} from './webhook.service';
import { sendData } from '../http/send-json';
import { apiDoor, type Door } from '../companies/company-scope';
import { OPERATOR } from '../activity/activity.repository';

/**
 * The webhook operations as route handlers, for the caller its door names: `/api/v1`'s token or
 * the portal's session (which shows its own list). A branch token reads (list, detail) the webhooks
 * that receive its events; everything else is the head account's (403 FORBIDDEN). Each caller sees
 * only the webhooks of its scope's mode: a test token's are the sandbox's, and receive only sandbox
 * events.
 */
export function webhookHandlers(
  deps: GatewayDeps,
  door: Door,
): Record<'create' | 'list' | 'detail' | 'health' | 'patch' | 'remove' | 'rotateSecret' | 'ping', RequestHandler> {
  const create: RequestHandler = async (req, res) => {
    const caller = door.caller(req);
    requireHead(caller);
    const body = validateWebhookCreate(req.body);
    sendData(res, 201, await createWebhook(deps, door.scope(req), body, caller.usuario));
  };
  const list: RequestHandler = async (req, res) => {
    sendData(res, 200, await listWebhooks(deps, door.scope(req)));
  };
  const detail: RequestHandler = async (req, res) => {
    sendData(res, 200, await webhookDetail(deps, door.scope(req), String(req.params.id)));
  };
  // Readable by every caller that can read the detail (a branch token too).
  const health: RequestHandler = async (req, res) => {
    sendData(res, 200, await webhookHealth(deps, door.scope(req), String(req.params.id), deps.clock.now()));
  };
  const patch: RequestHandler = async (req, res) => {
    const caller = door.caller(req);
    requireHead(caller);
    const body = validateWebhookPatch(req.body);
    sendData(res, 200, await patchWebhook(deps, door.scope(req), String(req.params.id), body, caller.usuario));
  };
  const remove: RequestHandler = async (req, res) => {
    const caller = door.caller(req);
    requireHead(caller);
    sendData(res, 200, await deleteWebhook(deps, door.scope(req), String(req.params.id), caller.usuario));
  };
  const rotateSecret: RequestHandler = async (req, res) => {
    const caller = door.caller(req);
    requireHead(caller);
    // The body is optional: no body rotates with the default overlap.
    const body = validateSecretRotation(req.body ?? {});
    sendData(res, 200, await rotateWebhookSecret(deps, door.scope(req), String(req.params.id), body, caller.usuario));
  };
  const ping: RequestHandler = async (req, res) => {
    requireHead(door.caller(req));
    sendData(res, 200, await pingWebhook(deps, door.scope(req), String(req.params.id)));
  };
  return { create, list, detail, health, patch, remove, rotateSecret, ping };
}

/** The six webhook operations of `/api/v1`, secret rotation and health; a webhook's deliveries are `mountDeliveryRoutes`'. */
export function mountWebhookRoutes(router: Router, deps: GatewayDeps): void {
  const h = webhookHandlers(deps, apiDoor);
  route(router, '/webhooks', { post: h.create, get: h.list });
  route(router, '/webhooks/:id', { get: h.detail, patch: h.patch, delete: h.remove });
  route(router, '/webhooks/:id/secreto', { post: h.rotateSecret });
  route(router, '/webhooks/:id/test', { post: h.ping });
  route(router, '/webhooks/:id/salud', { get: h.health });
}

/** The operator's action that gives a branch its own webhook (an internal route); it is live. */
export function mountWebhookInternalRoutes(router: Router, deps: GatewayDeps): void {
  route(router, '/empresas/:id/sucursales/:sid/webhooks', {
    post: async (req, res) => {
      const body = validateWebhookCreate(req.body);
      const empresa = await requireCompany(deps.db, String(req.params.id));
      const sucursal = await requireBranch(deps.db, empresa.id, String(req.params.sid));
      sendData(res, 201, await createWebhook(deps, { empresaId: empresa.id, sucursalId: sucursal.id, modo: 'live' }, body, OPERATOR));
    },
  });
}
