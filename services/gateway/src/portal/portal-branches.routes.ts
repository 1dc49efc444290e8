import type { Request, Router } from 'express';
import { validateWebhookCreate, type Sucursal } from '@svc/contracts';
import type { GatewayDeps } from '../deps';
import { route } from '../http/route-table';
import { sendData } from '../http/send-json';
import { tokenPairGeneratedAt } from '../auth/token.repository';
import { listBranches } from '../companies/company.repository';
import { requireBranch, requireBranchesEnabled, requireCompany } from '../companies/company.service';
import { createWebhook, listOwnerWebhookViews } from '../webhooks/webhook.service';
import { portalCaller } from './portal-caller';

/** The session's company, 409 SUCURSALES_DESHABILITADAS unless it has branches enabled. */
async function branchesCompany(deps: Pick<GatewayDeps, 'db'>, req: Request) {
  const empresa = await requireCompany(deps.db, portalCaller(req).empresaId);
  requireBranchesEnabled(empresa);
  return empresa;
}

/** The branch `:sid` of the session's company (which must have branches enabled), else 409 or 404. */
export async function requirePortalBranch(deps: Pick<GatewayDeps, 'db'>, req: Request): Promise<Sucursal> {
  const empresa = await branchesCompany(deps, req);
  return requireBranch(deps.db, empresa.id, String(req.params.sid));
}

/**
 * The Sucursales page (branches enabled only): each branch with when its pair was generated and its
 * live webhooks, and "Crear webhook" for a branch (live, as the internal route's). Its tokens are
 * `mountPortalTokenRoutes`'.
 */
export function mountPortalBranchRoutes(router: Router, deps: GatewayDeps): void {
  route(router, '/sucursales', {
    get: async (req, res) => {
      const empresa = await branchesCompany(deps, req);
      const branches = await listBranches(deps.db, empresa.id);
      const data = await Promise.all(
        branches.map(async (b) => {
          const at = await tokenPairGeneratedAt(deps.db, { empresaId: empresa.id, sucursalId: b.id });
          return {
            id: b.id,
            nombre: b.nombre,
            tokensGeneradosEn: at ? at.toISOString() : null,
            webhooks: await listOwnerWebhookViews(deps, { empresaId: empresa.id, modo: 'live', sucursalId: b.id }),
          };
        }),
      );
      sendData(res, 200, data);
    },
  });

  route(router, '/sucursales/:sid/webhooks', {
    post: async (req, res) => {
      const body = validateWebhookCreate(req.body);
      const sucursal = await requirePortalBranch(deps, req);
      const owner = { empresaId: sucursal.empresa_id, sucursalId: sucursal.id, modo: 'live' as const };
      sendData(res, 201, await createWebhook(deps, owner, body, portalCaller(req).usuario));
    },
  });
}
