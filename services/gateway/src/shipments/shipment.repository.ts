import { CompiledQuery, sql } from 'kysely';
import type { Db, Estado, Guia, Modo, PlanPersonalizado, ShipmentEvent } from '@svc/schema';

/** Whose shipments a caller may see: the company's of one mode, or only one branch's. */
export interface ShipmentScope {
  empresaId: string;
  modo: Modo;
  /** Set for a branch token: only that branch's shipments. */
  sucursalId: string | null;
}

export interface NewShipment {
  numeroGuia: string;
  destinatario: Record<string, unknown>;
  paquete: Record<string, unknown>;
  referencia: string | null;
  extra: Record<string, unknown> | null;
  /** Id of its GUIA_CREADA event in the outbox; null for a sandbox shipment (no event). */
  eventId: string | null;
}

export interface InsertedShipment {
  numeroGuia: string;
  createdAt: Date;
}

export interface Owner {
  empresaId: string;
  sucursalId: string | null;
  modo: Modo;
}

/*
 * The creation statement, in four shapes (live or sandbox; one shipment or a batch). Its text is
 * fixed per shape and built once, and it runs as a prepared statement (see createDb): on the hot
 * path that spares kysely's query building and Postgres's parse and plan on every creation.
 * `@name` marks a parameter; statement() numbers them.
 */
const USED_TODAY = '(case when guias_hoy_dia = @day::date then guias_hoy else 0 end)';
const CHARGED = `charged as (
    update empresas set
      guias_hoy = ${USED_TODAY} + @n::int,
      guias_hoy_dia = @day::date,
      creditos = case when plan_personalizado = 'APROBADA' then creditos else creditos - @n::int end
    where id = @empresa::uuid
      and ${USED_TODAY} + @n::int <= limite_diario
      and (plan_personalizado = 'APROBADA' or (plan_activo and creditos >= @n::int))
    returning id
  ),`;
const INPUT = `input as (
    select * from jsonb_to_recordset(@guias::jsonb)
      as x(ord int, numero_guia text, evento_id uuid, destinatario jsonb, paquete jsonb, referencia text, extra jsonb)
  ),`;
const EVENT = `@empresa::uuid, @sucursal::uuid, 'GUIA_CREADA',
    jsonb_build_object('numeroGuia', inserted.numero_guia, 'estado', 'CREADA'), @requestId::text`;

type Param = 'day' | 'n' | 'empresa' | 'sucursal' | 'modo' | 'requestId' | 'guias' | 'numero' | 'destinatario' | 'paquete' | 'referencia' | 'extra' | 'eventId';

function statement(template: string): { text: string; params: Param[] } {
  const params: Param[] = [];
  const text = template.replace(/@([A-Za-z]+)/g, (_m, name: Param) => {
    if (!params.includes(name)) params.push(name);
    return `$${params.indexOf(name) + 1}`;
  });
  return { text, params };
}

function creation(live: boolean, one: boolean): { text: string; params: Param[] } {
  const rows = one
    ? `select @numero::text, @empresa::uuid, @sucursal::uuid, @modo::text, 'CREADA', @destinatario::jsonb, @paquete::jsonb,
        @referencia::text, @extra::jsonb ${live ? 'from charged' : ''}`
    : `select numero_guia, @empresa::uuid, @sucursal::uuid, @modo::text, 'CREADA', destinatario, paquete, referencia, extra
      from input ${live ? 'where exists (select 1 from charged)' : ''} order by ord`;
  const events = !live
    ? ''
    : `, events as (insert into outbox (id, empresa_id, sucursal_id, evento, data, request_id)
        ${one ? `select @eventId::uuid, ${EVENT} from inserted` : `select input.evento_id, ${EVENT} from input join inserted using (numero_guia)`})`;
  return statement(`/*prepared:svc_create_guias_${live ? 'live' : 'test'}_${one ? 'one' : 'many'}*/
with ${live ? CHARGED : ''} ${one ? '' : INPUT}
  inserted as (
    insert into guias (numero_guia, empresa_id, sucursal_id, modo, estado, destinatario, paquete, referencia, extra)
    ${rows}
    returning id, numero_guia, created_at
  ),
  history as (
    insert into guia_historial (guia_id, estado, evento, fecha)
    select id, 'CREADA', 'GUIA_CREADA', created_at from inserted
  )
  ${events}
select numero_guia, created_at from inserted`);
}

const CREATION = {
  live: { one: creation(true, true), many: creation(true, false) },
  test: { one: creation(false, true), many: creation(false, false) },
};

/**
 * Creates the shipments in ONE statement (a round trip is the dearest thing on the hot path):
 * for a live owner, the charge of `n` shipments to today's allowance and, unless the custom plan is
 * approved, `n` credits, as a conditional UPDATE whose row lock serialises concurrent creations of
 * the company until commit; then, only if it charged, the rows (status CREADA), their first history
 * entry and their GUIA_CREADA outbox events. Returns them in the order given, or [] when the charge
 * was refused (nothing written). Run it on its own (autocommit) or inside a transaction.
 */
export async function insertShipments(
  trx: Db,
  owner: Owner,
  guias: NewShipment[],
  context: { day: string; requestId: string | null },
): Promise<InsertedShipment[]> {
  const one = guias.length === 1 ? guias[0] : undefined;
  const values: Record<Param, unknown> = {
    day: context.day,
    n: guias.length,
    empresa: owner.empresaId,
    sucursal: owner.sucursalId,
    modo: owner.modo,
    requestId: context.requestId,
    guias: one
      ? null
      : JSON.stringify(
          guias.map((g, ord) => ({
            ord,
            numero_guia: g.numeroGuia,
            evento_id: g.eventId,
            destinatario: g.destinatario,
            paquete: g.paquete,
            referencia: g.referencia,
            extra: g.extra,
          })),
        ),
    numero: one?.numeroGuia,
    destinatario: one && JSON.stringify(one.destinatario),
    paquete: one && JSON.stringify(one.paquete),
    referencia: one?.referencia,
    extra: one?.extra ? JSON.stringify(one.extra) : null,
    eventId: one?.eventId,
  };
  const { text, params } = CREATION[owner.modo][one ? 'one' : 'many'];
  const result = await trx.executeQuery<{ numero_guia: string; created_at: Date }>(
    CompiledQuery.raw(
      text,
      params.map((p) => values[p] ?? null),
    ),
  );
  if (result.rows.length === 0) return [];
  if (one) return [{ numeroGuia: one.numeroGuia, createdAt: result.rows[0]!.created_at }];
  const byNumero = new Map(result.rows.map((r) => [r.numero_guia, r.created_at]));
  return guias.map((g) => ({ numeroGuia: g.numeroGuia, createdAt: byNumero.get(g.numeroGuia)! }));
}

/** True when the error is the unique index on numero_guia (a generated number already taken). */
export function isNumeroGuiaTaken(err: unknown): boolean {
  const e = err as { code?: unknown; constraint?: unknown } | null;
  return e?.code === '23505' && typeof e.constraint === 'string' && e.constraint.includes('numero_guia');
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
export async function listShipments(db: Db, scope: ShipmentScope, limit: number, beforeId: string | undefined): Promise<Guia[]> {
  let q = db.selectFrom('guias').selectAll().where('empresa_id', '=', scope.empresaId).where('modo', '=', scope.modo);
  if (scope.sucursalId) q = q.where('sucursal_id', '=', scope.sucursalId);
  if (beforeId !== undefined) q = q.where('id', '<', beforeId);
  return q.orderBy('id', 'desc').limit(limit).execute();
}

/** A shipment the caller may see, or undefined (another company's, branch's or mode's is not found). */
export async function findShipment(db: Db, scope: ShipmentScope, numeroGuia: string): Promise<Guia | undefined> {
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
}

/** The shipment's history, oldest first. */
export async function listHistory(db: Db, guiaId: string): Promise<HistoryEntry[]> {
  return db
    .selectFrom('guia_historial')
    .select(['estado', 'evento', 'fecha', 'motivo'])
    .where('guia_id', '=', guiaId)
    .orderBy('id', 'asc')
    .execute();
}

/** The shipment, locked until the transaction ends: concurrent transitions of it run one after another. */
export async function lockShipment(trx: Db, numeroGuia: string): Promise<Guia | undefined> {
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
