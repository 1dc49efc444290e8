import type { Router } from 'express';
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
} from './webhook.service';
import { sendJson } from '../http/send-json';
import { principalOf } from '../http/request-principal';
import { scopeOf } from '../companies/company-scope';
import { API_USER, OPERATOR } from '../activity/activity.repository';

/**
 * The six webhook operations of `/api/v1`, and secret rotation (extensions.md); a webhook's
 * deliveries are `mountDeliveryRoutes`'. A branch token reads (list, detail) the webhooks that
 * receive its events; everything else is the head account's (403 FORBIDDEN). Each token sees only
 * the webhooks of its own mode (`scopeOf`): a test token's are the sandbox's, and receive only
 * sandbox events.
 */
export function mountWebhookRoutes(router: Router, deps: GatewayDeps): void {
  route(router, '/webhooks', {
    post: async (req, res) => {
      const principal = principalOf(req);
      requireHead(principal);
      const body = validateWebhookCreate(req.body);
      const data = await createWebhook(deps, scopeOf(principal), body, API_USER);
      sendJson(res, 201, { success: true, data });
    },
    get: async (req, res) => {
      const data = await listWebhooks(deps, scopeOf(principalOf(req)));
      sendJson(res, 200, { success: true, data });
    },
  });

  route(router, '/webhooks/:id', {
    get: async (req, res) => {
      const data = await webhookDetail(deps, scopeOf(principalOf(req)), String(req.params.id));
      sendJson(res, 200, { success: true, data });
    },
    patch: async (req, res) => {
      const principal = principalOf(req);
      requireHead(principal);
      const body = validateWebhookPatch(req.body);
      const data = await patchWebhook(deps, scopeOf(principal), String(req.params.id), body, API_USER);
      sendJson(res, 200, { success: true, data });
    },
    delete: async (req, res) => {
      const principal = principalOf(req);
      requireHead(principal);
      const data = await deleteWebhook(deps, scopeOf(principal), String(req.params.id), API_USER);
      sendJson(res, 200, { success: true, data });
    },
  });

  route(router, '/webhooks/:id/secreto', {
    post: async (req, res) => {
      const principal = principalOf(req);
      requireHead(principal);
      // The body is optional: no body rotates with the default overlap.
      const body = validateSecretRotation(req.body ?? {});
      const data = await rotateWebhookSecret(deps, scopeOf(principal), String(req.params.id), body, API_USER);
      sendJson(res, 200, { success: true, data });
    },
  });

  route(router, '/webhooks/:id/test', {
    post: async (req, res) => {
      const principal = principalOf(req);
      requireHead(principal);
      const data = await pingWebhook(deps, scopeOf(principal), String(req.params.id));
      sendJson(res, 200, { success: true, data });
    },
  });
}

/** The portal's action that gives a branch its own webhook (an internal route); it is live. */
export function mountWebhookInternalRoutes(router: Router, deps: GatewayDeps): void {
  route(router, '/empresas/:id/sucursales/:sid/webhooks', {
    post: async (req, res) => {
      const body = validateWebhookCreate(req.body);
      const empresa = await requireCompany(deps.db, String(req.params.id));
      const sucursal = await requireBranch(deps.db, empresa.id, String(req.params.sid));
      const data = await createWebhook(deps, { empresaId: empresa.id, sucursalId: sucursal.id, modo: 'live' }, body, OPERATOR);
      sendJson(res, 201, { success: true, data });
    },
  });
}
