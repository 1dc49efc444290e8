import { sql, type RawBuilder } from 'kysely';
import { insertEventsSql, prepared, webhooksVersionOf, type Db, type NewEvent, type PendingJob, type Transaction } from '@svc/platform';
import type { Estado, Guia, ShipmentEvent } from '@svc/contracts';
import type { CompanyScope } from '../companies/company-scope';
import { chargeSandboxShipments, chargeShipments } from '../companies/company.repository';
import { creationEvent, pendingJobs } from '../outbox/outbox.repository';

export interface NewShipment {
  numeroGuia: string;
  destinatario: Record<string, unknown>;
  paquete: Record<string, unknown>;
  referencia: string | null;
  extra: Record<string, unknown> | null;
}

/** A row the creation statement returns: one per shipment, each with the webhook count it read. */
interface CreatedRow {
  numero_guia: string;
  created_at: Date;
  webhooks_version: string;
}

export interface CreatedShipments {
  /** When each shipment was created, in the order given. */
  createdAt: Date[];
  /** Their GUIA_CREADA events' jobs, for the relay once the statement has committed. */
  jobs: PendingJob[];
}

/**
 * The creation statement: the charge, the shipments (status CREADA), their first history entry and
 * their GUIA_CREADA events in one prepared statement, each table's part from its owner (the
 * charge from the companies' repository, the events from @svc/platform's outbox table module)
 * (docs/decisions/0001-creation-in-one-prepared-statement.md).
 */
function creationStatement(
  owner: CompanyScope,
  shipments: readonly NewShipment[],
  events: readonly NewEvent[],
  sandboxDailyLimit: number,
): RawBuilder<CreatedRow> {
  const n = shipments.length;
  const charge = owner.modo === 'live' ? chargeShipments(owner.empresaId, n) : chargeSandboxShipments(owner.empresaId, n, sandboxDailyLimit);
  const [one] = shipments;
  // One shipment from plain parameters, a batch from one JSON array: each shape keeps one text.
  const rows =
    n === 1 && one
      ? sql`select ${one.numeroGuia}::text, ${owner.empresaId}::uuid, ${owner.sucursalId}::uuid, ${owner.modo}::text, 'CREADA',
          ${JSON.stringify(one.destinatario)}::jsonb, ${JSON.stringify(one.paquete)}::jsonb, ${one.referencia}::text,
          ${one.extra ? JSON.stringify(one.extra) : null}::jsonb
        from charged`
      : sql`select numero_guia, ${owner.empresaId}::uuid, ${owner.sucursalId}::uuid, ${owner.modo}::text, 'CREADA', destinatario, paquete, referencia, extra
        from jsonb_to_recordset(${JSON.stringify(shipments.map(inputRow))}::jsonb)
          as x(ord int, numero_guia text, destinatario jsonb, paquete jsonb, referencia text, extra jsonb)
        where exists (select 1 from charged)
        order by ord`;
  return sql`
    with charged as (${charge}),
    inserted as (
      insert into guias (numero_guia, empresa_id, sucursal_id, modo, estado, destinatario, paquete, referencia, extra)
      ${rows}
      returning id, numero_guia, created_at
    ),
    history as (
      insert into guia_historial (guia_id, estado, evento, fecha)
      select id, 'CREADA', 'GUIA_CREADA', created_at from inserted
    ),
    events as (${insertEventsSql(events, 'inserted')})
    select numero_guia, created_at, ${webhooksVersionOf(sql`${owner.empresaId}::uuid`)} as webhooks_version from inserted`;
}

/** A batch's shipment as the statement's JSON input holds it; `ord` keeps the order given. */
const inputRow = (s: NewShipment, ord: number) => ({
  ord,
  numero_guia: s.numeroGuia,
  destinatario: s.destinatario,
  paquete: s.paquete,
  referencia: s.referencia,
  extra: s.extra,
});

/**
 * Creates the shipments, all or none, in one statement whose charge (today's allowance and the
 * credits; for a sandbox owner, the sandbox cap) holds the company's row lock until commit, so
 * concurrent creations never overspend. Returns undefined when the charge was refused (nothing
 * written). Runs on its own (autocommit) or inside a transaction.
 */
export async function insertShipments(
  db: Db,
  owner: CompanyScope,
  shipments: readonly NewShipment[],
  context: { requestId: string | null; sandboxDailyLimit: number },
): Promise<CreatedShipments | undefined> {
  const events = shipments.map((s) => creationEvent(owner, context.requestId, s.numeroGuia));
  const name = `svc_create_guias_${owner.modo}_${shipments.length === 1 ? 'one' : 'many'}`;
  const result = await db.executeQuery<CreatedRow>(prepared(name, creationStatement(owner, shipments, events, context.sandboxDailyLimit), db));
  const first = result.rows[0];
  if (first === undefined) return undefined;
  const createdAt = new Map(result.rows.map((r) => [r.numero_guia, r.created_at]));
  return {
    createdAt: shipments.map((s) => createdAt.get(s.numeroGuia)!),
    // The events' rows take the statement's now(), as the shipments' do.
    jobs: pendingJobs(events, Number(first.webhooks_version), first.created_at),
  };
}

/** True when the error is the unique index on numero_guia (a generated number already taken). */
export function isNumeroGuiaTaken(err: unknown): boolean {
  const e = err as { code?: unknown; constraint?: unknown } | null;
  return e?.code === '23505' && typeof e.constraint === 'string' && e.constraint.includes('numero_guia');
}

/** One page of the scope's shipments (a branch's scope: the branch's only), newest first, strictly older than `beforeId` when given. */
export async function listShipments(db: Db, scope: CompanyScope, limit: number, beforeId: string | undefined): Promise<Guia[]> {
  let q = db.selectFrom('guias').selectAll().where('empresa_id', '=', scope.empresaId).where('modo', '=', scope.modo);
  if (scope.sucursalId) q = q.where('sucursal_id', '=', scope.sucursalId);
  if (beforeId !== undefined) q = q.where('id', '<', beforeId);
  return q.orderBy('id', 'desc').limit(limit).execute();
}

/** A shipment the scope sees (a branch's scope: the branch's only), or undefined: another company's, branch's or mode's is not found. */
export async function findShipment(db: Db, scope: CompanyScope, numeroGuia: string): Promise<Guia | undefined> {
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

/**
 * The shipment, locked until the transaction ends: concurrent transitions of it run one after another.
 * With a scope, only a shipment the scope sees (`findShipment`'s rule); without, any (the courier's).
 */
export async function lockShipment(trx: Transaction, numeroGuia: string, scope?: CompanyScope): Promise<Guia | undefined> {
  let q = trx.selectFrom('guias').selectAll().where('numero_guia', '=', numeroGuia);
  if (scope) {
    q = q.where('empresa_id', '=', scope.empresaId).where('modo', '=', scope.modo);
    if (scope.sucursalId) q = q.where('sucursal_id', '=', scope.sucursalId);
  }
  return q.forUpdate().executeTakeFirst();
}

/**
 * Moves the shipment to `estado` and records the event in its history; returns the entry's position
 * in that history (1 = GUIA_CREADA), true while the caller holds the shipment's lock (`lockShipment`).
 */
export async function recordTransition(
  trx: Transaction,
  guiaId: string,
  entry: { estado: Estado; evento: ShipmentEvent; motivo: string | null; fechaEntrega: string | null },
): Promise<number> {
  await trx.updateTable('guias').set({ estado: entry.estado, updated_at: sql<Date>`now()` }).where('id', '=', guiaId).execute();
  await trx
    .insertInto('guia_historial')
    .values({ guia_id: guiaId, estado: entry.estado, evento: entry.evento, motivo: entry.motivo, fecha_entrega: entry.fechaEntrega })
    .execute();
  const row = await trx
    .selectFrom('guia_historial')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('guia_id', '=', guiaId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}
