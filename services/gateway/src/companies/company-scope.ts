import type { Request } from 'express';
import type { Modo } from '@svc/contracts';
import type { Principal } from '../auth/principal';
import { API_USER } from '../activity/activity.repository';

/**
 * One company's data in one mode (a test token's is the sandbox's), narrowed to a branch when
 * `sucursalId` is set: what a caller may see, and who owns what it creates. Each repository says
 * how it applies the branch (a branch sees its own shipments, but also the company's webhooks).
 */
export interface CompanyScope {
  empresaId: string;
  /** Set for a branch token. */
  sucursalId: string | null;
  modo: Modo;
}

/** The caller of an `/api/v1` route: `authenticate` runs before every one of them and sets it, or answers 401. */
export function principalOf(req: Request): Principal {
  return req.principal!;
}

/** A token's scope: its company, mode and branch (a test token works in the sandbox, docs/integrators.md). */
export function scopeOf(p: Principal): CompanyScope {
  return { empresaId: p.empresa.id, sucursalId: p.sucursal?.id ?? null, modo: p.modo };
}

/**
 * Who acts on a request, whatever the door it came in by, as a service takes it: the company, the
 * branch of a branch token, and the `usuario` the activity log names for what it does.
 */
export interface Caller {
  empresaId: string;
  sucursalId: string | null;
  usuario: string;
}

/**
 * How a route reads who calls it, so that one handler serves every door: an `/api/v1` token
 * (`apiDoor`) or a portal session (portal/portal-caller.ts). `caller` never refuses (the door's own
 * guard already did); `scope` is read where the operation first needs it, after its own checks and
 * the body's, since the portal's mode is the request's `?modo=` and may be refused there.
 */
export interface Door {
  caller(req: Request): Caller;
  scope(req: Request): CompanyScope;
}

/** `/api/v1`: the bearer token's company, branch and mode, acting as API_USER. */
export const apiDoor: Door = {
  caller(req) {
    const p = principalOf(req);
    return { empresaId: p.empresa.id, sucursalId: p.sucursal?.id ?? null, usuario: API_USER };
  },
  scope: (req) => scopeOf(principalOf(req)),
};
