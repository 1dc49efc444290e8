import type { Request } from 'express';
import { AppError, type Modo } from '@svc/contracts';
import type { Caller, CompanyScope, Door } from '../companies/company-scope';
import { singleParam } from '../http/query-params';
import { sessionOf } from './portal-session.middleware';

/**
 * The caller of a portal request, derived from its session: the company's head account (never a
 * branch), named in the activity log by the `usuario` its link was issued for.
 */
export function portalCaller(req: Request): Caller {
  const s = sessionOf(req);
  return { empresaId: s.empresaId, sucursalId: null, usuario: s.usuario };
}

const MODOS: readonly Modo[] = ['live', 'test'];

/** `?modo=live|test` (default live): which of the company's two worlds the Webhooks page shows. */
function modoOf(req: Request): Modo {
  const value = singleParam(req.query as Record<string, unknown>, 'modo') ?? 'live';
  if (!(MODOS as readonly string[]).includes(value)) throw new AppError('VALIDATION_ERROR', 'modo must be one of live, test');
  return value as Modo;
}

const scopeIn = (req: Request, modo: Modo): CompanyScope => ({ empresaId: sessionOf(req).empresaId, sucursalId: null, modo });

/** The Webhooks page's door: the company's own webhooks (no branch's) of the mode `?modo=` names. */
export const portalDoor: Door = { caller: portalCaller, scope: (req) => scopeIn(req, modoOf(req)) };

/** The Sandbox page's door: the company's test world, as its test token would see it, without one being needed. */
export const sandboxDoor: Door = { caller: portalCaller, scope: (req) => scopeIn(req, 'test') };
