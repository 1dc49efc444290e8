import type { Router } from 'express';
import {
  AppError,
  MAX_CREDITOS,
  validateCreditos,
  validateEmpresaCreate,
  validateEmpresaPatch,
  validateSucursalCreate,
} from '@svc/schema';
import type { GatewayDeps } from '../deps';
import { route } from '../http/route-table';
import { hashesOfCompany } from '../auth/token.repository';
import { addCredits, insertCompany, insertBranch, updateCompany } from './company.repository';
import { deleteTokens, presentCompany, requireCompany, requireBranch, rotateTokens } from './company.service';

/** The customer portal's actions on companies, branches, credits and tokens (operations.md). */
export function mountCompanyInternalRoutes(router: Router, deps: GatewayDeps): void {
  const { db, clock, tokenCache } = deps;

  route(router, '/empresas', {
    post: async (req, res) => {
      const body = validateEmpresaCreate(req.body);
      const empresa = await insertCompany(db, body);
      res.status(201).json({ success: true, data: presentCompany(empresa, clock) });
    },
  });

  route(router, '/empresas/:id', {
    get: async (req, res) => {
      const empresa = await requireCompany(db, String(req.params.id));
      res.json({ success: true, data: presentCompany(empresa, clock) });
    },
    patch: async (req, res) => {
      const body = validateEmpresaPatch(req.body);
      const current = await requireCompany(db, String(req.params.id));
      const empresa = await updateCompany(db, current.id, body);
      if (!empresa) throw new AppError('NOT_FOUND', 'no such company');
      // Cached principals carry the company's name and branch setting: drop them everywhere.
      await tokenCache.invalidate(await hashesOfCompany(db, empresa.id), { revoke: false });
      res.json({ success: true, data: presentCompany(empresa, clock) });
    },
  });

  route(router, '/empresas/:id/creditos', {
    post: async (req, res) => {
      const { cantidad } = validateCreditos(req.body);
      const empresa = await requireCompany(db, String(req.params.id));
      const creditos = await addCredits(db, empresa.id, cantidad, MAX_CREDITOS);
      // The company exists (just read), so only the bound refused it.
      if (creditos === undefined) {
        throw new AppError('VALIDATION_ERROR', `cantidad would take the balance over ${MAX_CREDITOS} credits`);
      }
      res.json({ success: true, data: { creditos } });
    },
  });

  route(router, '/empresas/:id/tokens', {
    post: async (req, res) => {
      const empresa = await requireCompany(db, String(req.params.id));
      if (!empresa.verificada) {
        throw new AppError('EMPRESA_NO_VERIFICADA', 'the company must be verified before generating tokens');
      }
      const tokens = await rotateTokens(db, tokenCache, { empresaId: empresa.id, sucursalId: null });
      res.status(201).json({ success: true, data: tokens });
    },
    delete: async (req, res) => {
      const empresa = await requireCompany(db, String(req.params.id));
      const deleted = await deleteTokens(db, tokenCache, { empresaId: empresa.id, sucursalId: null });
      res.json({ success: true, data: { eliminados: deleted } });
    },
  });

  route(router, '/empresas/:id/sucursales', {
    post: async (req, res) => {
      const { nombre } = validateSucursalCreate(req.body);
      const empresa = await requireCompany(db, String(req.params.id));
      if (!empresa.sucursales_habilitadas) {
        throw new AppError('SUCURSALES_DESHABILITADAS', 'branches are not enabled for this company');
      }
      const sucursal = await insertBranch(db, empresa.id, nombre);
      res.status(201).json({ success: true, data: { id: sucursal.id, nombre: sucursal.nombre } });
    },
  });

  route(router, '/empresas/:id/sucursales/:sid/tokens', {
    post: async (req, res) => {
      const empresa = await requireCompany(db, String(req.params.id));
      if (!empresa.verificada) {
        throw new AppError('EMPRESA_NO_VERIFICADA', 'the company must be verified before generating tokens');
      }
      if (!empresa.sucursales_habilitadas) {
        throw new AppError('SUCURSALES_DESHABILITADAS', 'branches are not enabled for this company');
      }
      const sucursal = await requireBranch(db, empresa.id, String(req.params.sid));
      const tokens = await rotateTokens(db, tokenCache, { empresaId: empresa.id, sucursalId: sucursal.id });
      res.status(201).json({ success: true, data: tokens });
    },
    delete: async (req, res) => {
      const empresa = await requireCompany(db, String(req.params.id));
      const sucursal = await requireBranch(db, empresa.id, String(req.params.sid));
      const deleted = await deleteTokens(db, tokenCache, { empresaId: empresa.id, sucursalId: sucursal.id });
      res.json({ success: true, data: { eliminados: deleted } });
    },
  });
}
