import { AppError, guatemalaDay, isUuid, type Clock, type Db, type Empresa, type Modo, type Sucursal } from '@svc/schema';
import { generateToken, hashToken } from '../auth/token';
import { replaceTokens } from '../auth/token.repository';
import type { TokenCache } from '../auth/token-cache';
import { findCompany, findBranch } from './company.repository';

/** The company as the portal's routes show it. */
export function presentCompany(e: Empresa, clock: Clock) {
  return {
    id: e.id,
    nombre: e.nombre,
    verificada: e.verificada,
    sucursalesHabilitadas: e.sucursales_habilitadas,
    limiteDiario: e.limite_diario,
    planActivo: e.plan_activo,
    creditos: e.creditos,
    planPersonalizado: e.plan_personalizado,
    guiasHoy: e.guias_hoy_dia === guatemalaDay(clock.now()) ? e.guias_hoy : 0,
    createdAt: e.created_at.toISOString(),
  };
}

export async function requireCompany(db: Db, id: string): Promise<Empresa> {
  const empresa = isUuid(id) ? await findCompany(db, id) : undefined;
  if (!empresa) throw new AppError('NOT_FOUND', 'no such company');
  return empresa;
}

export async function requireBranch(db: Db, empresaId: string, sucursalId: string): Promise<Sucursal> {
  const sucursal = isUuid(sucursalId) ? await findBranch(db, empresaId, sucursalId) : undefined;
  if (!sucursal) throw new AppError('NOT_FOUND', 'no such branch in this company');
  return sucursal;
}

/**
 * Generates (or regenerates) the owner's live/test pair; the values are returned once and never
 * stored. The old hashes are revoked in Redis before the commit: if Redis cannot take the
 * revocation, nothing changes (503) rather than leaving old tokens alive on other instances.
 */
export async function rotateTokens(
  db: Db,
  cache: TokenCache,
  owner: { empresaId: string; sucursalId: string | null },
): Promise<Record<Modo, string>> {
  const tokens = { live: generateToken('live'), test: generateToken('test') };
  const hashes = { live: hashToken(tokens.live), test: hashToken(tokens.test) };
  await db.transaction().execute(async (trx) => {
    const old = await replaceTokens(trx, owner, hashes);
    await cache.invalidate(old, { revoke: true });
  });
  return tokens;
}

export async function deleteTokens(
  db: Db,
  cache: TokenCache,
  owner: { empresaId: string; sucursalId: string | null },
): Promise<number> {
  return db.transaction().execute(async (trx) => {
    const old = await replaceTokens(trx, owner, null);
    await cache.invalidate(old, { revoke: true });
    return old.length;
  });
}
