import type { Db, Empresa, EmpresaFields, Sucursal } from '@svc/schema';

const COLUMNS = {
  nombre: 'nombre',
  verificada: 'verificada',
  sucursalesHabilitadas: 'sucursales_habilitadas',
  limiteDiario: 'limite_diario',
  planActivo: 'plan_activo',
  creditos: 'creditos',
  planPersonalizado: 'plan_personalizado',
} as const;

function toColumns(fields: Partial<EmpresaFields>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, col] of Object.entries(COLUMNS)) {
    const v = (fields as Record<string, unknown>)[k];
    if (v !== undefined) out[col] = v;
  }
  return out;
}

export async function insertCompany(db: Db, fields: EmpresaFields): Promise<Empresa> {
  return db
    .insertInto('empresas')
    .values({ ...toColumns(fields), nombre: fields.nombre })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function findCompany(db: Db, id: string): Promise<Empresa | undefined> {
  return db.selectFrom('empresas').selectAll().where('id', '=', id).executeTakeFirst();
}

export async function updateCompany(db: Db, id: string, fields: Partial<EmpresaFields>): Promise<Empresa | undefined> {
  return db
    .updateTable('empresas')
    .set({ ...toColumns(fields), updated_at: new Date() })
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
}

/** Adds to the balance unless it would pass `max`: undefined when no row took it (unknown, or over). */
export async function addCredits(db: Db, id: string, cantidad: number, max: number): Promise<number | undefined> {
  const row = await db
    .updateTable('empresas')
    .set((eb) => ({ creditos: eb('creditos', '+', cantidad), updated_at: new Date() }))
    .where('id', '=', id)
    .where('creditos', '<=', max - cantidad)
    .returning('creditos')
    .executeTakeFirst();
  return row?.creditos;
}

export async function insertBranch(db: Db, empresaId: string, nombre: string): Promise<Sucursal> {
  return db.insertInto('sucursales').values({ empresa_id: empresaId, nombre }).returningAll().executeTakeFirstOrThrow();
}

export async function findBranch(db: Db, empresaId: string, sucursalId: string): Promise<Sucursal | undefined> {
  return db
    .selectFrom('sucursales')
    .selectAll()
    .where('id', '=', sucursalId)
    .where('empresa_id', '=', empresaId)
    .executeTakeFirst();
}
