import type { Modo } from '@svc/contracts';
import type { Principal } from '../auth/principal';

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

/** The caller's scope: its token's company, mode and branch (extensions.md, Sandbox parity). */
export function scopeOf(p: Principal): CompanyScope {
  return { empresaId: p.empresa.id, sucursalId: p.sucursal?.id ?? null, modo: p.modo };
}
