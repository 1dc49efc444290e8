import { sql, type RawBuilder } from 'kysely';
import type { Db, Transaction } from '@svc/platform';
import { GUATEMALA_TIME_ZONE, type Empresa, type EmpresaFields, type PlanPersonalizado, type Sucursal } from '@svc/contracts';

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

/** The company's branches, oldest first. */
export async function listBranches(db: Db, empresaId: string): Promise<Sucursal[]> {
  return db.selectFrom('sucursales').selectAll().where('empresa_id', '=', empresaId).orderBy('created_at').orderBy('id').execute();
}

/**
 * Locks the company row until the transaction ends: what is decided per company under it (the
 * 10-active-webhook limit) cannot be decided twice at once. False when there is no such company.
 */
export async function lockCompany(trx: Transaction, empresaId: string): Promise<boolean> {
  const row = await trx.selectFrom('empresas').select('id').where('id', '=', empresaId).forUpdate().executeTakeFirst();
  return row !== undefined;
}

// ---- the charge of shipment creations -------------------------------------------------------------

/**
 * Today in Guatemala by Postgres's clock, the one clock every gateway shares (theirs may be
 * skewed); fixed for the statement, so a statement's checks and writes agree on it.
 */
const TODAY = sql<string>`(statement_timestamp() at time zone ${sql.lit(GUATEMALA_TIME_ZONE)})::date`;

/**
 * Shipments already counted against today's allowance. A counter of an earlier day counts for
 * nothing; one of a later day than this statement's (a statement that took its time across
 * midnight after another had moved the counter on) counts in full, so the day never moves back.
 */
const usedToday = (count: string, day: string) => sql<number>`(case when ${sql.ref(day)} >= ${TODAY} then ${sql.ref(count)} else 0 end)`;
const USED_TODAY = usedToday('guias_hoy', 'guias_hoy_dia');
const SANDBOX_USED_TODAY = usedToday('guias_sandbox_hoy', 'guias_sandbox_hoy_dia');

/**
 * The charge of `n` shipments to the company's allowance of today and, unless its custom plan is
 * approved, `n` credits: a conditional UPDATE that returns the company's id only when both
 * suffice. Its row lock serialises the company's creations until commit. It is the body of the
 * `charged` CTE of the creation statement (shipment.repository.ts), so the charge and the rows it
 * pays for are one statement.
 */
export function chargeShipments(empresaId: string, n: number): RawBuilder<{ id: string }> {
  return sql`
    update empresas set
      guias_hoy = ${USED_TODAY} + ${n}::int,
      guias_hoy_dia = greatest(guias_hoy_dia, ${TODAY}),
      creditos = case when plan_personalizado = 'APROBADA' then creditos else creditos - ${n}::int end
    where id = ${empresaId}::uuid
      and ${USED_TODAY} + ${n}::int <= limite_diario
      and (plan_personalizado = 'APROBADA' or (plan_activo and creditos >= ${n}::int))
    returning id`;
}

/**
 * The charge of `n` sandbox shipments to the company's sandbox allowance of today
 * (SANDBOX_DAILY_LIMIT, `sandboxLimit`), counted and reset as the live allowance is, on counters
 * of its own: a test token takes neither credits nor the live allowance. The same conditional
 * UPDATE, so the same row lock serialises concurrent creations and none overspends the cap; the
 * body of the sandbox creation's `charged` CTE.
 */
export function chargeSandboxShipments(empresaId: string, n: number, sandboxLimit: number): RawBuilder<{ id: string }> {
  return sql`
    update empresas set
      guias_sandbox_hoy = ${SANDBOX_USED_TODAY} + ${n}::int,
      guias_sandbox_hoy_dia = greatest(guias_sandbox_hoy_dia, ${TODAY})
    where id = ${empresaId}::uuid
      and ${SANDBOX_USED_TODAY} + ${n}::int <= ${sandboxLimit}::int
    returning id`;
}

/** Today in Guatemala by Postgres's clock, as `YYYY-MM-DD`. */
export async function guatemalaToday(db: Db): Promise<string> {
  const { rows } = await sql<{ today: string }>`select ${TODAY}::text as today`.execute(db);
  return rows[0]!.today;
}

export interface Allowance {
  usedToday: number;
  /** Sandbox shipments counted today. */
  sandboxUsedToday: number;
  limiteDiario: number;
  planActivo: boolean;
  creditos: number;
  planPersonalizado: PlanPersonalizado | null;
}

/** The company's allowance as of now: read after a refused charge, to say which limit refused it. */
export async function readAllowance(trx: Db, empresaId: string): Promise<Allowance | undefined> {
  const row = await trx
    .selectFrom('empresas')
    .select([
      'limite_diario',
      'plan_activo',
      'creditos',
      'plan_personalizado',
      USED_TODAY.as('used_today'),
      SANDBOX_USED_TODAY.as('sandbox_used_today'),
    ])
    .where('id', '=', empresaId)
    .executeTakeFirst();
  return (
    row && {
      usedToday: row.used_today,
      sandboxUsedToday: row.sandbox_used_today,
      limiteDiario: row.limite_diario,
      planActivo: row.plan_activo,
      creditos: row.creditos,
      planPersonalizado: row.plan_personalizado,
    }
  );
}
