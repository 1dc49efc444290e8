import type { Request, Router } from 'express';
import { validateWebhookCreate, validateWebhookPatch } from '@svc/schema';
import type { GatewayDeps } from '../deps';
import { route } from '../http/route-table';
import { requireCompany, requireBranch } from '../companies/company.service';
import {
  createWebhook,
  deleteWebhook,
  deliveryDetail,
  deliveryLog,
  listWebhooks,
  patchWebhook,
  pingWebhook,
  requireHead,
  scopeOf,
  webhookDetail,
} from './webhook.service';

function principalOf(req: Request) {
  return req.principal!;
}

/**
 * The six webhook operations of `/api/v1`. A branch token reads (list, detail) the webhooks that
 * receive its events; everything else is the head account's (403 FORBIDDEN). Live and test tokens
 * manage the same webhooks: webhooks have no sandbox copy.
 */
export function mountWebhookRoutes(router: Router, deps: GatewayDeps): void {
  route(router, '/webhooks', {
    post: async (req, res) => {
      const principal = principalOf(req);
      requireHead(principal);
      const body = validateWebhookCreate(req.body);
      const data = await createWebhook(deps, { empresaId: principal.empresa.id, sucursalId: null }, body);
      res.status(201).json({ success: true, data });
    },
    get: async (req, res) => {
      const data = await listWebhooks(deps, scopeOf(principalOf(req)));
      res.json({ success: true, data });
    },
  });

  route(router, '/webhooks/:id', {
    get: async (req, res) => {
      const data = await webhookDetail(deps, scopeOf(principalOf(req)), String(req.params.id));
      res.json({ success: true, data });
    },
    patch: async (req, res) => {
      const principal = principalOf(req);
      requireHead(principal);
      const body = validateWebhookPatch(req.body);
      const data = await patchWebhook(deps, scopeOf(principal), String(req.params.id), body);
      res.json({ success: true, data });
    },
    delete: async (req, res) => {
      const principal = principalOf(req);
      requireHead(principal);
      const data = await deleteWebhook(deps, scopeOf(principal), String(req.params.id));
      res.json({ success: true, data });
    },
  });

  // The delivery log: readable by every token that reads the webhook's detail.
  route(router, '/webhooks/:id/entregas', {
    get: async (req, res) => {
      const data = await deliveryLog(deps, scopeOf(principalOf(req)), String(req.params.id), req.query as Record<string, unknown>);
      res.json({ success: true, data });
    },
  });

  route(router, '/webhooks/:id/entregas/:entregaId', {
    get: async (req, res) => {
      const data = await deliveryDetail(deps, scopeOf(principalOf(req)), String(req.params.id), String(req.params.entregaId));
      res.json({ success: true, data });
    },
  });

  route(router, '/webhooks/:id/test', {
    post: async (req, res) => {
      const principal = principalOf(req);
      requireHead(principal);
      const data = await pingWebhook(deps, scopeOf(principal), String(req.params.id));
      res.json({ success: true, data });
    },
  });
}

/** The portal's action that gives a branch its own webhook (an internal route). */
export function mountWebhookInternalRoutes(router: Router, deps: GatewayDeps): void {
  route(router, '/empresas/:id/sucursales/:sid/webhooks', {
    post: async (req, res) => {
      const body = validateWebhookCreate(req.body);
      const empresa = await requireCompany(deps.db, String(req.params.id));
      const sucursal = await requireBranch(deps.db, empresa.id, String(req.params.sid));
      const data = await createWebhook(deps, { empresaId: empresa.id, sucursalId: sucursal.id }, body);
      res.status(201).json({ success: true, data });
    },
  });
}
