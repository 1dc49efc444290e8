import type { Router } from 'express';
import { validateCreditos, validateEmpresaCreate, validateEmpresaPatch, validateSucursalCreate, type Empresa } from '@svc/contracts';
import type { GatewayDeps } from '../deps';
import { guatemalaToday } from './company.repository';
import { route } from '../http/route-table';
import {
  addCompanyCredits,
  createBranch,
  createCompany,
  deleteTokens,
  issueTokens,
  patchCompany,
  presentCompany,
  requireCompany,
} from './company.service';
import { sendJson } from '../http/send-json';
import { OPERATOR } from '../activity/activity.repository';

/**
 * The customer portal's actions on companies, branches, credits and tokens, under `/internal/v1`
 * behind the admin token: the operator's stand-in for the portal. Each action is in the activity log
 * as OPERATOR's, written in its own transaction.
 */
export function mountCompanyInternalRoutes(router: Router, deps: GatewayDeps): void {
  const { db } = deps;
  const present = async (e: Empresa) => presentCompany(e, await guatemalaToday(db));
  const owner = (params: Record<string, string | string[] | undefined>) => ({
    empresaId: String(params.id),
    sucursalId: params.sid === undefined ? null : String(params.sid),
  });

  route(router, '/empresas', {
    post: async (req, res) => {
      const empresa = await createCompany(db, validateEmpresaCreate(req.body), OPERATOR);
      sendJson(res, 201, { success: true, data: await present(empresa) });
    },
  });

  route(router, '/empresas/:id', {
    get: async (req, res) => {
      const empresa = await requireCompany(db, String(req.params.id));
      sendJson(res, 200, { success: true, data: await present(empresa) });
    },
    patch: async (req, res) => {
      const body = validateEmpresaPatch(req.body);
      const empresa = await patchCompany(deps, String(req.params.id), body, OPERATOR);
      sendJson(res, 200, { success: true, data: await present(empresa) });
    },
  });

  route(router, '/empresas/:id/creditos', {
    post: async (req, res) => {
      const { cantidad } = validateCreditos(req.body);
      const creditos = await addCompanyCredits(db, String(req.params.id), cantidad, OPERATOR);
      sendJson(res, 200, { success: true, data: { creditos } });
    },
  });

  route(router, '/empresas/:id/sucursales', {
    post: async (req, res) => {
      const { nombre } = validateSucursalCreate(req.body);
      const sucursal = await createBranch(db, String(req.params.id), nombre, OPERATOR);
      sendJson(res, 201, { success: true, data: { id: sucursal.id, nombre: sucursal.nombre } });
    },
  });

  for (const path of ['/empresas/:id/tokens', '/empresas/:id/sucursales/:sid/tokens']) {
    route(router, path, {
      post: async (req, res) => {
        sendJson(res, 201, { success: true, data: await issueTokens(deps, owner(req.params), OPERATOR) });
      },
      delete: async (req, res) => {
        sendJson(res, 200, { success: true, data: { eliminados: await deleteTokens(deps, owner(req.params), OPERATOR) } });
      },
    });
  }
}
