import { sql } from 'kysely';
import type { Db, Estado, Guia, Modo, PlanPersonalizado, ShipmentEvent } from '@svc/schema';

/** Whose shipments a caller may see: the company's of one mode, or only one branch's. */
export interface GuiaScope {
  empresaId: string;
  modo: Modo;
  /** Set for a branch token: only that branch's shipments. */
  sucursalId: string | null;
}

export interface NewGuia {
  numeroGuia: string;
  destinatario: Record<string, unknown>;
  paquete: Record<string, unknown>;
  referencia: string | null;
  extra: Record<string, unknown> | null;
}

export interface InsertedGuia {
  id: string;
  numeroGuia: string;
  createdAt: Date;
}

/** Inserts the shipments (status CREADA) and their first history entry; returns them in the order given. */
export async function insertGuias(
  trx: Db,
  owner: { empresaId: string; sucursalId: string | null; modo: Modo },
  guias: NewGuia[],
): Promise<InsertedGuia[]> {
  const rows = await trx
    .insertInto('guias')
    .values(
      guias.map((g) => ({
        numero_guia: g.numeroGuia,
        empresa_id: owner.empresaId,
        sucursal_id: owner.sucursalId,
        modo: owner.modo,
        estado: 'CREADA' as const,
        destinatario: JSON.stringify(g.destinatario),
        paquete: JSON.stringify(g.paquete),
        referencia: g.referencia,
        extra: g.extra === null ? null : JSON.stringify(g.extra),
      })),
    )
    .returning(['id', 'numero_guia', 'created_at'])
    .execute();
  await trx
    .insertInto('guia_historial')
    .values(rows.map((r) => ({ guia_id: r.id, estado: 'CREADA' as const, evento: 'GUIA_CREADA' as const, fecha: r.created_at })))
    .execute();
  const byNumero = new Map(rows.map((r) => [r.numero_guia, r]));
  return guias.map((g) => {
    const r = byNumero.get(g.numeroGuia)!;
    return { id: r.id, numeroGuia: r.numero_guia, createdAt: r.created_at };
  });
}

/** True when the error is the unique index on numero_guia (a generated number already taken). */
export function isNumeroGuiaTaken(err: unknown): boolean {
  const e = err as { code?: unknown; constraint?: unknown } | null;
  return e?.code === '23505' && typeof e.constraint === 'string' && e.constraint.includes('numero_guia');
}

/**
 * Takes `n` shipments from today's allowance and, unless the custom plan is approved, `n` credits,
 * in one conditional UPDATE: it changes the row only if both suffice, and its row lock serialises
 * concurrent creations of the company until their transaction ends. False when refused.
 */
export async function chargeEmpresa(trx: Db, empresaId: string, n: number, day: string): Promise<boolean> {
  const usedToday = sql<number>`(case when guias_hoy_dia = ${day}::date then guias_hoy else 0 end)`;
  const result = await trx
    .updateTable('empresas')
    .set({
      guias_hoy: sql<number>`${usedToday} + ${n}`,
      guias_hoy_dia: day,
      creditos: sql<number>`case when plan_personalizado = 'APROBADA' then creditos else creditos - ${n} end`,
    })
    .where('id', '=', empresaId)
    .where(sql<boolean>`${usedToday} + ${n} <= limite_diario`)
    .where(sql<boolean>`(plan_personalizado = 'APROBADA' or (plan_activo and creditos >= ${n}))`)
    .executeTakeFirst();
  return result.numUpdatedRows === 1n;
}

export interface Allowance {
  usedToday: number;
  limiteDiario: number;
  planActivo: boolean;
  creditos: number;
  planPersonalizado: PlanPersonalizado | null;
}

/** The company's allowance as of now: read after a refused charge, to say which limit refused it. */
export async function readAllowance(trx: Db, empresaId: string, day: string): Promise<Allowance | undefined> {
  const row = await trx
    .selectFrom('empresas')
    .select(['guias_hoy', 'guias_hoy_dia', 'limite_diario', 'plan_activo', 'creditos', 'plan_personalizado'])
    .where('id', '=', empresaId)
    .executeTakeFirst();
  return (
    row && {
      usedToday: row.guias_hoy_dia === day ? row.guias_hoy : 0,
      limiteDiario: row.limite_diario,
      planActivo: row.plan_activo,
      creditos: row.creditos,
      planPersonalizado: row.plan_personalizado,
    }
  );
}

/** One page of the caller's shipments, newest first, strictly older than `beforeId` when given. */
export async function listGuias(db: Db, scope: GuiaScope, limit: number, beforeId: string | undefined): Promise<Guia[]> {
  let q = db.selectFrom('guias').selectAll().where('empresa_id', '=', scope.empresaId).where('modo', '=', scope.modo);
  if (scope.sucursalId) q = q.where('sucursal_id', '=', scope.sucursalId);
  if (beforeId !== undefined) q = q.where('id', '<', beforeId);
  return q.orderBy('id', 'desc').limit(limit).execute();
}

/** A shipment the caller may see, or undefined (another company's, branch's or mode's is not found). */
export async function findGuia(db: Db, scope: GuiaScope, numeroGuia: string): Promise<Guia | undefined> {
  let q = db
    .selectFrom('guias')
    .selectAll()
    .where('numero_guia', '=', numeroGuia)
    .where('empresa_id', '=', scope.empresaId)
    .where('modo', '=', scope.modo);
  if (scope.sucursalId) q = q.where('sucursal_id', '=', scope.sucursalId);
  return q.executeTakeFirst();
}

export interface HistoryEntry {
  estado: Estado;
  evento: ShipmentEvent;
  fecha: Date;
  motivo: string | null;
  fechaEntrega: string | null;
}

/** The shipment's history, oldest first. */
export async function listHistory(db: Db, guiaId: string): Promise<HistoryEntry[]> {
  const rows = await db
    .selectFrom('guia_historial')
    .select(['estado', 'evento', 'fecha', 'motivo', 'fecha_entrega'])
    .where('guia_id', '=', guiaId)
    .orderBy('id', 'asc')
    .execute();
  return rows.map((r) => ({ estado: r.estado, evento: r.evento, fecha: r.fecha, motivo: r.motivo, fechaEntrega: r.fecha_entrega }));
}

/** The shipment, locked until the transaction ends: concurrent transitions of it run one after another. */
export async function lockGuia(trx: Db, numeroGuia: string): Promise<Guia | undefined> {
  return trx.selectFrom('guias').selectAll().where('numero_guia', '=', numeroGuia).forUpdate().executeTakeFirst();
}

/** Moves the shipment to `estado` and records the event in its history. */
export async function recordTransition(
  trx: Db,
  guiaId: string,
  entry: { estado: Estado; evento: ShipmentEvent; motivo: string | null; fechaEntrega: string | null },
): Promise<void> {
  await trx.updateTable('guias').set({ estado: entry.estado, updated_at: sql<Date>`now()` }).where('id', '=', guiaId).execute();
  await trx
    .insertInto('guia_historial')
    .values({ guia_id: guiaId, estado: entry.estado, evento: entry.evento, motivo: entry.motivo, fecha_entrega: entry.fechaEntrega })
    .execute();
}
