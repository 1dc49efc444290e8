import { AppError, isUuid, MAX_CREDITOS, type Empresa, type EmpresaFields, type Modo, type Sucursal } from '@svc/contracts';
import type { Db } from '@svc/platform';
import type { GatewayDeps } from '../deps';
import { generateToken, hashToken } from '../auth/token';
import { replaceTokens } from '../auth/token.repository';
import { refreshCompanyTokens, suspendBranchTokens } from '../auth/branch-tokens';
import type { TokenCache } from '../auth/token-cache';
import { recordActivity, type ActivityDetail } from '../activity/activity.repository';
import { addCredits, findBranch, findCompany, insertBranch, insertCompany, lockCompany, updateCompany } from './company.repository';

/** The company as the internal routes and the portal show it; `today` is Postgres's day in Guatemala (guatemalaToday). */
export function presentCompany(e: Empresa, today: string) {
  return {
    id: e.id,
    nombre: e.nombre,
    verificada: e.verificada,
    sucursalesHabilitadas: e.sucursales_habilitadas,
    limiteDiario: e.limite_diario,
    planActivo: e.plan_activo,
    creditos: e.creditos,
    planPersonalizado: e.plan_personalizado,
    // A counter of a later day than `today` (read across midnight) still counts as today's.
    guiasHoy: e.guias_hoy_dia !== null && e.guias_hoy_dia >= today ? e.guias_hoy : 0,
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

// ---- the portal's rules ---------------------------------------------------------------------------

/** Tokens are issued to verified companies only: a company is verified in the portal first. */
function requireVerified(e: Empresa): void {
  if (!e.verificada) throw new AppError('EMPRESA_NO_VERIFICADA', 'the company must be verified before generating tokens');
}

/** 409 SUCURSALES_DESHABILITADAS unless the company has branches enabled. */
export function requireBranchesEnabled(e: Empresa): void {
  if (!e.sucursales_habilitadas) throw new AppError('SUCURSALES_DESHABILITADAS', 'branches are not enabled for this company');
}

/** A company's fields as the activity log keeps them: what was given, by its API name (none is a secret). */
function fieldsDetail(fields: Partial<EmpresaFields>): ActivityDetail {
  return Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined)) as ActivityDetail;
}

/** Creates the company; `usuario` (who) goes to the activity log with it. */
export function createCompany(db: Db, fields: EmpresaFields, usuario: string): Promise<Empresa> {
  return db.transaction().execute(async (trx) => {
    const empresa = await insertCompany(trx, fields);
    await recordActivity(trx, { empresaId: empresa.id, usuario, accion: 'company.created', detalle: fieldsDetail(fields) });
    return empresa;
  });
}

export async function patchCompany(
  deps: Pick<GatewayDeps, 'db' | 'tokenCache'>,
  id: string,
  fields: Partial<EmpresaFields>,
  usuario: string,
): Promise<Empresa> {
  const current = await requireCompany(deps.db, id);
  const empresa = await deps.db.transaction().execute(async (trx) => {
    const updated = await updateCompany(trx, current.id, fields);
    if (updated) await recordActivity(trx, { empresaId: updated.id, usuario, accion: 'company.changed', detalle: fieldsDetail(fields) });
    if (updated && fields.sucursalesHabilitadas === false) await suspendBranchTokens(trx, deps.tokenCache, updated.id);
    return updated;
  });
  if (!empresa) throw new AppError('NOT_FOUND', 'no such company');
  // Cached principals carry the company's name and branch setting: drop them everywhere.
  await refreshCompanyTokens(deps.db, deps.tokenCache, empresa.id, fields.sucursalesHabilitadas);
  return empresa;
}

/** Adds to the balance; the new balance. */
export async function addCompanyCredits(db: Db, id: string, cantidad: number, usuario: string): Promise<number> {
  const empresa = await requireCompany(db, id);
  const creditos = await db.transaction().execute(async (trx) => {
    const balance = await addCredits(trx, empresa.id, cantidad, MAX_CREDITOS);
    if (balance !== undefined) await recordActivity(trx, { empresaId: empresa.id, usuario, accion: 'credits.added', detalle: { cantidad, creditos: balance } });
    return balance;
  });
  // The company exists (just read), so only the bound refused it.
  if (creditos === undefined) {
    throw new AppError('VALIDATION_ERROR', `cantidad would take the balance over ${MAX_CREDITOS} credits`);
  }
  return creditos;
}

export async function createBranch(db: Db, empresaId: string, nombre: string, usuario: string): Promise<Sucursal> {
  const empresa = await requireCompany(db, empresaId);
  requireBranchesEnabled(empresa);
  return db.transaction().execute(async (trx) => {
    const sucursal = await insertBranch(trx, empresa.id, nombre);
    await recordActivity(trx, { empresaId: empresa.id, usuario, accion: 'branch.created', sucursalId: sucursal.id, detalle: { nombre } });
    return sucursal;
  });
}

/** A company's or a branch's token owner, as the portal's routes name it. */
export interface TokenOwner {
  empresaId: string;
  sucursalId: string | null;
}

/**
 * Generates (or regenerates) the owner's pair: the company must be verified and, for a branch,
 * have branches enabled. The old pair stops working at once on every gateway.
 */
export async function issueTokens(deps: Pick<GatewayDeps, 'db' | 'tokenCache'>, owner: TokenOwner, usuario: string): Promise<Record<Modo, string>> {
  const empresa = await requireCompany(deps.db, owner.empresaId);
  requireVerified(empresa);
  let sucursalId: string | null = null;
  if (owner.sucursalId !== null) {
    requireBranchesEnabled(empresa);
    sucursalId = (await requireBranch(deps.db, empresa.id, owner.sucursalId)).id;
  }
  return rotateTokens(deps.db, deps.tokenCache, { empresaId: empresa.id, sucursalId }, usuario);
}

/** Deletes the owner's pair; how many tokens stopped working. */
export async function deleteTokens(deps: Pick<GatewayDeps, 'db' | 'tokenCache'>, owner: TokenOwner, usuario: string): Promise<number> {
  const empresa = await requireCompany(deps.db, owner.empresaId);
  const sucursalId = owner.sucursalId === null ? null : (await requireBranch(deps.db, empresa.id, owner.sucursalId)).id;
  return deps.db.transaction().execute(async (trx) => {
    await lockCompany(trx, empresa.id);
    const old = await replaceTokens(trx, { empresaId: empresa.id, sucursalId }, null);
    await recordActivity(trx, { empresaId: empresa.id, usuario, accion: 'tokens.deleted', sucursalId, detalle: { eliminados: old.length } });
    await deps.tokenCache.invalidate(old, { revoke: true });
    return old.length;
  });
}

/**
 * The new live/test pair in place of the old; the values are returned once and never stored. The old hashes are revoked in Redis before the commit: if Redis cannot take the
 * revocation, nothing changes (503) rather than leaving old tokens alive on other instances.
 */
async function rotateTokens(
  db: Db,
  cache: TokenCache,
  owner: { empresaId: string; sucursalId: string | null },
  usuario: string,
): Promise<Record<Modo, string>> {
  const tokens = { live: generateToken('live'), test: generateToken('test') };
  const hashes = { live: hashToken(tokens.live), test: hashToken(tokens.test) };
  await db.transaction().execute(async (trx) => {
    // Concurrent regenerations of one owner take turns (each would otherwise insert its pair beside
    // the other's, against the unique index): each succeeds, and the last to commit wins.
    await lockCompany(trx, owner.empresaId);
    const old = await replaceTokens(trx, owner, hashes);
    // Which pair, never its values.
    await recordActivity(trx, { empresaId: owner.empresaId, usuario, accion: old.length > 0 ? 'tokens.regenerated' : 'tokens.generated', sucursalId: owner.sucursalId });
    await cache.invalidate(old, { revoke: true });
  });
  return tokens;
}
