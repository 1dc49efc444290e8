import { sql } from 'kysely';
import { guiaCreadaData, preparedQuery, type Db, type Estado, type Guia, type ShipmentEvent, type Transaction } from '@svc/schema';
import type { CompanyScope } from '../companies/company-scope';
import { CHARGE_SANDBOX_SHIPMENTS, CHARGE_SHIPMENTS, type ChargeParam } from '../companies/company.repository';
import { outboxInsert } from '../outbox/outbox.repository';
import { webhooksVersionSql } from '../webhooks/webhook.repository';

export interface NewShipment {
  numeroGuia: string;
  destinatario: Record<string, unknown>;
  paquete: Record<string, unknown>;
  referencia: string | null;
  extra: Record<string, unknown> | null;
  /** Id of its GUIA_CREADA event in the outbox (a sandbox shipment's goes to the test webhooks). */
  eventId: string;
}

export interface InsertedShipment {
  numeroGuia: string;
  createdAt: Date;
  /** The company's webhook count as this statement read it: its GUIA_CREADA event's `webhooksVersion`. */
  webhooksVersion: number;
}

/*
 * The creation statement, in four shapes (live or sandbox, which differ only in the allowance they
 * charge; one shipment or a batch). Its text is
 * fixed per shape and built once, and it runs as a prepared statement: on the hot path that spares
 * kysely's query building and Postgres's parse and plan on every creation. It is one statement
 * because a round trip is the dearest thing on the hot path; each table's part of it comes from the
 * table's owner (the charge from the company repository, the events from the outbox repository).
 * `@name` marks a parameter; statement() numbers them.
 */
const INPUT = `input as (
    select * from jsonb_to_recordset(@guias::jsonb)
      as x(ord int, numero_guia text, evento_id uuid, evento_data jsonb, destinatario jsonb, paquete jsonb, referencia text, extra jsonb)
  ),`;

type Param =
  | ChargeParam
  | 'sucursal'
  | 'modo'
  | 'requestId'
  | 'guias'
  | 'numero'
  | 'destinatario'
  | 'paquete'
  | 'referencia'
  | 'extra'
  | 'eventId'
  | 'eventData';

function statement(template: string): { text: string; params: Param[] } {
  const params: Param[] = [];
  const text = template.replace(/@([A-Za-z]+)/g, (_m, name: Param) => {
    if (!params.includes(name)) params.push(name);
    return `$${params.indexOf(name) + 1}`;
  });
  return { text, params };
}

function creation(live: boolean, one: boolean): { name: string; text: string; params: Param[] } {
  const rows = one
    ? `select @numero::text, @empresa::uuid, @sucursal::uuid, @modo::text, 'CREADA', @destinatario::jsonb, @paquete::jsonb,
        @referencia::text, @extra::jsonb from charged`
    : `select numero_guia, @empresa::uuid, @sucursal::uuid, @modo::text, 'CREADA', destinatario, paquete, referencia, extra
      from input where exists (select 1 from charged) order by ord`;
  const event = `@empresa::uuid, @sucursal::uuid, 'GUIA_CREADA'`;
  // GUIA_CREADA is the first entry of its shipment's history: secuencia 1.
  const rest = `@requestId::text, 1, @modo::text`;
  const events = outboxInsert(
    one
      ? `select @eventId::uuid, ${event}, @eventData::jsonb, ${rest} from inserted`
      : `select input.evento_id, ${event}, input.evento_data, ${rest} from input join inserted using (numero_guia)`,
  );
  const { text, params } = statement(`
with charged as (${live ? CHARGE_SHIPMENTS : CHARGE_SANDBOX_SHIPMENTS}), ${one ? '' : INPUT}
  inserted as (
    insert into guias (numero_guia, empresa_id, sucursal_id, modo, estado, destinatario, paquete, referencia, extra)
    ${rows}
    returning id, numero_guia, created_at
  ),
  history as (
    insert into guia_historial (guia_id, estado, evento, fecha)
    select id, 'CREADA', 'GUIA_CREADA', created_at from inserted
  ),
  events as (${events})
select numero_guia, created_at, ${webhooksVersionSql('@empresa::uuid')} as webhooks_version from inserted`);
  return { name: `svc_create_guias_${live ? 'live' : 'test'}_${one ? 'one' : 'many'}`, text, params };
}

const CREATION = {
  live: { one: creation(true, true), many: creation(true, false) },
  test: { one: creation(false, true), many: creation(false, false) },
};

/**
 * Creates the shipments in ONE statement: the charge of `n` shipments, as a conditional UPDATE whose
 * row lock serialises concurrent creations of the company until commit (for a live owner, to today's
 * allowance and, unless the custom plan is approved, `n` credits; for a sandbox owner, to today's
 * sandbox cap only); then, only if it charged, the rows (status CREADA), their first history entry
 * and their GUIA_CREADA outbox events in the owner's mode. Returns them in the order given, or []
 * when the charge was refused (nothing written). Run it on its own (autocommit) or inside a
 * transaction.
 */
export async function insertShipments(
  trx: Db,
  owner: CompanyScope,
  guias: NewShipment[],
  context: { requestId: string | null; sandboxDailyLimit: number },
): Promise<InsertedShipment[]> {
  const one = guias.length === 1 ? guias[0] : undefined;
  const values: Record<Param, unknown> = {
    n: guias.length,
    empresa: owner.empresaId,
    sandboxLimit: context.sandboxDailyLimit,
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
            evento_data: guiaCreadaData(g.numeroGuia),
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
    eventData: one && JSON.stringify(guiaCreadaData(one.numeroGuia)),
  };
  const { name, text, params } = CREATION[owner.modo][one ? 'one' : 'many'];
  const result = await trx.executeQuery<{ numero_guia: string; created_at: Date; webhooks_version: string }>(
    preparedQuery(
      name,
      text,
      params.map((p) => values[p] ?? null),
    ),
  );
  const first = result.rows[0];
  if (first === undefined) return [];
  const webhooksVersion = Number(first.webhooks_version);
  if (one) return [{ numeroGuia: one.numeroGuia, createdAt: first.created_at, webhooksVersion }];
  const byNumero = new Map(result.rows.map((r) => [r.numero_guia, r.created_at]));
  return guias.map((g) => ({ numeroGuia: g.numeroGuia, createdAt: byNumero.get(g.numeroGuia)!, webhooksVersion }));
}

/** True when the error is the unique index on numero_guia (a generated number already taken). */
export function isNumeroGuiaTaken(err: unknown): boolean {
  const e = err as { code?: unknown; constraint?: unknown } | null;
  return e?.code === '23505' && typeof e.constraint === 'string' && e.constraint.includes('numero_guia');
}

/** One page of the caller's shipments, newest first, strictly older than `beforeId` when given. */
export async function listShipments(db: Db, scope: CompanyScope, limit: number, beforeId: string | undefined): Promise<Guia[]> {
  let q = db.selectFrom('guias').selectAll().where('empresa_id', '=', scope.empresaId).where('modo', '=', scope.modo);
  if (scope.sucursalId) q = q.where('sucursal_id', '=', scope.sucursalId);
  if (beforeId !== undefined) q = q.where('id', '<', beforeId);
  return q.orderBy('id', 'desc').limit(limit).execute();
}

/** A shipment the caller may see, or undefined (another company's, branch's or mode's is not found). */
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
