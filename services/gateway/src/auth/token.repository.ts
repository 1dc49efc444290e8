import type { Db, Transaction } from '@svc/platform';
import type { Modo } from '@svc/contracts';
import type { Principal } from './principal';

/**
 * Looks a token hash up among the stored hashes of companies and branches. A branch's token is
 * found only while its company has branches enabled: disabling them stops it at once, enabling
 * them again brings it back (the tokens themselves are kept; see `followBranchSetting`).
 */
export async function findPrincipalByHash(db: Db, hash: string): Promise<Principal | undefined> {
  const row = await db
    .selectFrom('tokens as t')
    .innerJoin('empresas as e', 'e.id', 't.empresa_id')
    .leftJoin('sucursales as s', 's.id', 't.sucursal_id')
    .select([
      't.id as tokenId',
      't.modo',
      'e.id as empresaId',
      'e.nombre as empresaNombre',
      'e.sucursales_habilitadas',
      's.id as sucursalId',
      's.nombre as sucursalNombre',
    ])
    .where('t.hash', '=', hash)
    .where((eb) => eb.or([eb('t.sucursal_id', 'is', null), eb('e.sucursales_habilitadas', '=', true)]))
    .executeTakeFirst();
  if (!row) return undefined;
  return {
    tokenId: row.tokenId,
    tokenHash: hash,
    modo: row.modo,
    empresa: { id: row.empresaId, nombre: row.empresaNombre, sucursalesHabilitadas: row.sucursales_habilitadas },
    sucursal: row.sucursalId && row.sucursalNombre !== null ? { id: row.sucursalId, nombre: row.sucursalNombre } : null,
  };
}

/** Replaces the owner's pair in the caller's transaction; returns the hashes that stop working. */
export async function replaceTokens(
  db: Transaction,
  owner: { empresaId: string; sucursalId: string | null },
  hashes: Record<Modo, string> | null,
): Promise<string[]> {
  let del = db.deleteFrom('tokens').where('empresa_id', '=', owner.empresaId);
  del = owner.sucursalId ? del.where('sucursal_id', '=', owner.sucursalId) : del.where('sucursal_id', 'is', null);
  const old = await del.returning('hash').execute();
  if (hashes) {
    await db
      .insertInto('tokens')
      .values([
        { empresa_id: owner.empresaId, sucursal_id: owner.sucursalId, modo: 'live', hash: hashes.live },
        { empresa_id: owner.empresaId, sucursal_id: owner.sucursalId, modo: 'test', hash: hashes.test },
      ])
      .execute();
  }
  return old.map((r) => r.hash);
}

/** Every token hash of a company and its branches (to drop them from caches when it changes). */
export async function hashesOfCompany(db: Db, empresaId: string): Promise<string[]> {
  const rows = await db.selectFrom('tokens').select('hash').where('empresa_id', '=', empresaId).execute();
  return rows.map((r) => r.hash);
}

/** The token hashes of a company's branches (not the company's own pair). */
export async function hashesOfBranches(db: Db, empresaId: string): Promise<string[]> {
  const rows = await db.selectFrom('tokens').select('hash').where('empresa_id', '=', empresaId).where('sucursal_id', 'is not', null).execute();
  return rows.map((r) => r.hash);
}

/** When the owner's current pair was generated; undefined while it has none (the portal's Tokens page). */
export async function tokenPairGeneratedAt(db: Db, owner: { empresaId: string; sucursalId: string | null }): Promise<Date | undefined> {
  let q = db.selectFrom('tokens').select((eb) => eb.fn.max('created_at').as('at')).where('empresa_id', '=', owner.empresaId);
  q = owner.sucursalId ? q.where('sucursal_id', '=', owner.sucursalId) : q.where('sucursal_id', 'is', null);
  const row = await q.executeTakeFirst();
  return row?.at ?? undefined;
}
