import { sql, type ExpressionBuilder, type RawBuilder, type SelectQueryBuilder } from 'kysely';
import { insertOmittedOf, insertResendsOf, routesEvent, type Db, type Transaction } from '@svc/platform';
import type { AttemptErrorClass, Database, DeliveryState, EventName, LoggedEventData, Modo, Webhook } from '@svc/contracts';
import type { CompanyScope } from '../companies/company-scope';

/**
 * The gateway's reads of deliveries (`entregas`, `entrega_intentos`): what the webhook detail, the
 * list, the delivery log and the portal show, and the statements that pick what a resend or a
 * recovery sends again. Every write is the table module's (@svc/platform, tables/deliveries.table.ts):
 * the PING's record, the resends' insert; attempts of event deliveries (resends included) are the
 * dispatcher's to record.
 */

/** A delivery as the webhook detail shows it. */
export interface Delivery {
  id: string;
  evento: EventName;
  exitoso: boolean;
  statusCode: number;
  intentos: number;
  ultimoIntentoEn: Date | null;
  createdAt: Date;
}

/** One attempt as the delivery log keeps it. */
export interface AttemptLog {
  numero: number;
  /** When the attempt started. */
  fecha: Date;
  statusCode: number;
  duracionMs: number;
  error: AttemptErrorClass | null;
  mensaje: string | null;
  respuesta: string | null;
}

/**
 * The newest deliveries of a webhook that have been attempted, newest first (the detail's window).
 * A delivery waiting for its first attempt (or ended unattempted because its webhook was
 * deactivated) has no `intentos` (1 to 3) nor `ultimoIntentoEn` to show, as the list's
 * `ultimoDelivery` has no outcome for it.
 */
export async function latestDeliveries(db: Db, webhookId: string, limit: number, reader: LogReader = 'all'): Promise<Delivery[]> {
  const q = db
    .selectFrom('entregas')
    .select(['id', 'evento', 'exitoso', 'status_code', 'intentos', 'ultimo_intento_en', 'created_at'])
    .where('webhook_id', '=', webhookId)
    .where('ultimo_intento_en', 'is not', null);
  // The delivery log's branch rule (LogReader): the detail shows no more than the log does.
  const rows = await seenBy(q, reader)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(limit)
    .execute();
  return rows.map(toRecord);
}

/** A delivery of a listening session, with its shipment (the portal's Sandbox page). */
export interface SessionDelivery extends Delivery {
  numeroGuia: string | null;
  estado: DeliveryState;
}

/** The `limit` latest deliveries of each webhook (attempted or not), newest first: a listening session's. */
export async function latestDeliveriesOf(db: Db, webhookIds: readonly string[], limit: number): Promise<Map<string, SessionDelivery[]>> {
  if (webhookIds.length === 0) return new Map();
  const { rows } = await sql<{
    webhook_id: string;
    id: string;
    evento: EventName;
    exitoso: boolean;
    status_code: number;
    intentos: number;
    ultimo_intento_en: Date | null;
    created_at: Date;
    numero_guia: string | null;
    estado: DeliveryState;
  }>`
    select w.id as webhook_id, d.*
    from unnest(${sql.val([...webhookIds])}::uuid[]) as w(id)
    cross join lateral (
      select e.id, e.evento, e.estado, e.exitoso, e.status_code, e.intentos, e.ultimo_intento_en, e.created_at, e.numero_guia
      from entregas e
      where e.webhook_id = w.id
      order by e.created_at desc, e.id desc
      limit ${limit}
    ) d
  `.execute(db);
  const out = new Map<string, SessionDelivery[]>();
  for (const r of rows) {
    const list = out.get(r.webhook_id) ?? [];
    list.push({ ...toRecord(r), numeroGuia: r.numero_guia, estado: r.estado });
    out.set(r.webhook_id, list);
  }
  return out;
}

export interface LastAttempt {
  exitoso: boolean;
  statusCode: number;
  fecha: Date;
}

/**
 * The latest delivery that has been attempted, per webhook (the list's `ultimoDelivery`). A
 * delivery still waiting for its first attempt has no outcome to show yet, so it is skipped.
 */
export async function lastAttemptPerWebhook(db: Db, webhookIds: readonly string[], readerBranchId: string | null = null): Promise<Map<string, LastAttempt>> {
  if (webhookIds.length === 0) return new Map();
  // A branch reading a company webhook sees only its own events' deliveries, as in the log.
  const branchRule =
    readerBranchId === null
      ? sql``
      : sql`and (wh.sucursal_id is not null or exists (select 1 from outbox o where o.id = e.evento_id and o.sucursal_id = ${readerBranchId}::uuid))`;
  const result = await sql<{ webhook_id: string; exitoso: boolean; status_code: number; ultimo_intento_en: Date }>`
    select w.id as webhook_id, d.exitoso, d.status_code, d.ultimo_intento_en
    from unnest(${sql.val([...webhookIds])}::uuid[]) as w(id)
    join webhooks wh on wh.id = w.id
    cross join lateral (
      select e.exitoso, e.status_code, e.ultimo_intento_en
      from entregas e
      where e.webhook_id = w.id and e.ultimo_intento_en is not null ${branchRule}
      order by e.created_at desc, e.id desc
      limit 1
    ) d
  `.execute(db);
  return new Map(
    result.rows.map((r) => [r.webhook_id, { exitoso: r.exitoso, statusCode: r.status_code, fecha: r.ultimo_intento_en }]),
  );
}

function toRecord(r: {
  id: string;
  evento: EventName;
  exitoso: boolean;
  status_code: number;
  intentos: number;
  ultimo_intento_en: Date | null;
  created_at: Date;
}): Delivery {
  return {
    id: r.id,
    evento: r.evento,
    exitoso: r.exitoso,
    statusCode: r.status_code,
    intentos: r.intentos,
    ultimoIntentoEn: r.ultimo_intento_en,
    createdAt: r.created_at,
  };
}

// ---- the delivery log ------------------------------------------------------------------------------

export interface DeliveryFilters {
  exitoso?: boolean;
  estado?: DeliveryState;
  evento?: EventName;
  /** On createdAt, inclusive. */
  desde?: Date;
  /** On createdAt, exclusive. */
  hasta?: Date;
}

/** Where a page of the log starts: strictly after this delivery in (createdAt desc, id desc). */
export interface LogPosition {
  /** createdAt as Postgres writes it (microseconds: a JS Date would round it). */
  at: string;
  id: string;
}

export interface LoggedDelivery extends Delivery {
  estado: DeliveryState;
  eventoId: string | null;
  numeroGuia: string | null;
  reenvioDe: string | null;
  position: LogPosition;
}

const logColumns = [
  'id',
  'evento',
  'exitoso',
  'status_code',
  'intentos',
  'ultimo_intento_en',
  'created_at',
  'estado',
  'evento_id',
  'numero_guia',
  'reenvio_de',
  sql<string>`created_at::text`.as('at'),
] as const;

type LoggedRow = Parameters<typeof toRecord>[0] & {
  estado: DeliveryState;
  evento_id: string | null;
  numero_guia: string | null;
  reenvio_de: string | null;
  at: string;
};

function toLogged(r: LoggedRow): LoggedDelivery {
  return {
    ...toRecord(r),
    estado: r.estado,
    eventoId: r.evento_id,
    numeroGuia: r.numero_guia,
    reenvioDe: r.reenvio_de,
    position: { at: r.at, id: r.id },
  };
}

/**
 * Whose deliveries of webhook `w` the scope sees: a branch reading a company webhook's log sees only
 * its own branch's events (other branches' shipments and their receivers' answers are not its to
 * see); its own webhook's and the head account's, every one.
 */
export function logReaderOf(scope: CompanyScope, w: Pick<Webhook, 'sucursal_id'>): LogReader {
  return scope.sucursalId !== null && w.sucursal_id === null ? { branchId: scope.sucursalId } : 'all';
}

/** `q` narrowed to the deliveries `reader` sees (LogReader). */
function seenBy<O>(q: SelectQueryBuilder<Database, 'entregas', O>, reader: LogReader): SelectQueryBuilder<Database, 'entregas', O> {
  if (reader === 'all') return q;
  const { branchId } = reader;
  return q.where((eb) => ofBranchEvents(eb, branchId));
}

/**
 * Whose deliveries of a webhook a reader sees: every one, or (a branch reading a company webhook's
 * log, docs/integrators.md#the-delivery-log-resending-and-recovery) only those of that branch's events. An event's branch is its outbox row's,
 * kept as long as any delivery names the event; a PING has no event, so a branch sees none.
 */
export type LogReader = { branchId: string } | 'all';

function ofBranchEvents(eb: ExpressionBuilder<Database, 'entregas'>, branchId: string) {
  return eb.exists(eb.selectFrom('outbox').select(sql`1`.as('one')).whereRef('outbox.id', '=', 'entregas.evento_id').where('outbox.sucursal_id', '=', branchId));
}

/**
 * One page of a webhook's log as a statement, newest first: the single text of the log's query,
 * which `listDeliveryLog` runs and `test/delivery-log-plans.test.ts` explains. Each filter is served
 * by an index of `entregas` (migration 20261128120000): the webhook's own (webhook_id, created_at,
 * id) for no filter, `desde`/`hasta`, the cursor and `estado=exitosa`/`exitoso=true` (most rows);
 * (webhook_id, evento, ...) for `evento`; the partial (webhook_id, estado, ...) of unsuccessful rows
 * for `estado=pendiente|fallida`; the partial (webhook_id, ...) where not exitoso for `exitoso=false`.
 */
export function deliveryLogQuery(db: Db, webhookId: string, filters: DeliveryFilters, limit: number, after: LogPosition | undefined, reader: LogReader = 'all') {
  let q = db.selectFrom('entregas').select(logColumns).where('webhook_id', '=', webhookId);
  if (filters.exitoso !== undefined) q = q.where('exitoso', '=', filters.exitoso);
  if (filters.estado !== undefined) q = q.where('estado', '=', filters.estado);
  if (filters.evento !== undefined) q = q.where('evento', '=', filters.evento);
  if (filters.desde !== undefined) q = q.where('created_at', '>=', filters.desde);
  if (filters.hasta !== undefined) q = q.where('created_at', '<', filters.hasta);
  if (after !== undefined) q = q.where(sql<boolean>`(created_at, id) < (${after.at}::timestamptz, ${after.id}::uuid)`);
  return seenBy(q, reader).orderBy('created_at', 'desc').orderBy('id', 'desc').limit(limit);
}

/** One page of a webhook's deliveries that `reader` sees, newest first. */
export async function listDeliveryLog(
  db: Db,
  webhookId: string,
  filters: DeliveryFilters,
  limit: number,
  after: LogPosition | undefined,
  reader: LogReader = 'all',
): Promise<LoggedDelivery[]> {
  const rows = await deliveryLogQuery(db, webhookId, filters, limit, after, reader).execute();
  return rows.map(toLogged);
}

/** One delivery of the webhook that `reader` sees, or undefined (another webhook's is not found). */
export async function findLoggedDelivery(db: Db, webhookId: string, id: string, reader: LogReader = 'all'): Promise<LoggedDelivery | undefined> {
  const q = db.selectFrom('entregas').select(logColumns).where('id', '=', id).where('webhook_id', '=', webhookId);
  const row = await seenBy(q, reader).executeTakeFirst();
  return row && toLogged(row);
}

/** The attempts of a batch of deliveries, each delivery's oldest first. */
export async function attemptsOf(db: Db, ids: readonly string[]): Promise<Map<string, AttemptLog[]>> {
  const out = new Map<string, AttemptLog[]>(ids.map((id) => [id, []]));
  if (ids.length === 0) return out;
  const rows = await db
    .selectFrom('entrega_intentos')
    .selectAll()
    .where('entrega_id', '=', sql<string>`any(${sql.val([...ids])}::uuid[])`)
    .orderBy('entrega_id')
    .orderBy('numero')
    .execute();
  for (const r of rows) {
    out.get(r.entrega_id)?.push({
      numero: r.numero,
      fecha: r.fecha,
      statusCode: r.status_code,
      duracionMs: r.duracion_ms,
      error: r.error,
      mensaje: r.mensaje,
      respuesta: r.respuesta,
    });
  }
  return out;
}

// ---- resends ---------------------------------------------------------------------------------------

/** The event a resend sends again, as the outbox records it; null for a PING (it has no event). */
export interface ResentEvent {
  data: LoggedEventData;
  sequence: number | null;
  modo: Modo;
}

export interface Resent extends LoggedDelivery {
  event: ResentEvent | null;
  /** The new delivery's partition key (its first attempt's job carries it). */
  partitionAt: Date;
}

/**
 * Reads an event for the statement that writes its resends: a subquery of one row
 * `(event_data, event_sequence, event_modo)` for the event id in `column`, or none once the event is
 * gone. The outbox repository owns it (`eventFields`).
 */
export type EventFields = (column: string) => RawBuilder<unknown>;

/** A recovery's window on `createdAt`: `desde` inclusive, `hasta` exclusive. */
export interface RecoveryWindow {
  desde: Date;
  hasta: Date;
}

/** A delivery whose event is still kept (a PING has none to keep), as a resend needs it; `ev` is `eventFields`' row. */
const EVENT_KEPT = sql<boolean>`(e.evento = 'PING' or ev.event_data is not null)`;

/**
 * One statement: a new delivery per delivery `e` that `condition` picks (at most `limit`, oldest
 * first), sending its event again to the same webhook: the same `evento`, `evento_id` (for a PING,
 * the PING's own id) and shipment, `reenvio_de` = the original, pending and due now (the dispatcher
 * makes its attempts). A delivery whose event is no longer kept is skipped. Returns the resends with
 * their events, oldest original first, and where the last original stands.
 */
async function insertResends(
  trx: Transaction,
  condition: RawBuilder<boolean>,
  eventFields: EventFields,
  limit: number,
): Promise<{ resends: Resent[]; last: RecoveryPosition | undefined }> {
  const result = await sql<
    LoggedRow & { event_data: LoggedEventData | null; event_sequence: number | null; event_modo: Modo | null; original_at: string; particion_en: Date }
  >`
    with picked as (
      select e.id, e.webhook_id, e.evento_id, e.evento, e.numero_guia, e.created_at, ev.event_data, ev.event_sequence, ev.event_modo
      from entregas e
      left join lateral ${eventFields('e.evento_id')} ev on true
      where ${condition} and ${EVENT_KEPT}
      order by e.created_at, e.id
      limit ${limit}
    ), ins as (${insertResendsOf('picked')})
    select ins.*, picked.event_data, picked.event_sequence, picked.event_modo, picked.created_at::text as original_at
    from ins join picked on picked.id = ins.reenvio_de
    order by picked.created_at, picked.id
  `.execute(trx);
  const resends = result.rows.map((r) => ({
    ...toLogged(r),
    event: r.event_data === null || r.event_modo === null ? null : { data: r.event_data, sequence: r.event_sequence, modo: r.event_modo },
    partitionAt: r.particion_en,
  }));
  const last = result.rows[result.rows.length - 1];
  return { resends, last: last && last.reenvio_de !== null ? { at: last.original_at, id: last.reenvio_de } : undefined };
}

/**
 * Resends one delivery of the webhook (whatever its state: the caller has checked it); undefined
 * when its event is no longer kept. Run it in the transaction that holds the webhook's lock.
 */
export async function insertResend(trx: Transaction, webhookId: string, id: string, eventFields: EventFields): Promise<Resent | undefined> {
  const { resends } = await insertResends(trx, sql<boolean>`e.webhook_id = ${webhookId} and e.id = ${id}`, eventFields, 1);
  return resends[0];
}

/** Where a recovery stands in its window: the last original it resent, in (createdAt, id) order. */
export interface RecoveryPosition {
  /** createdAt as Postgres writes it (microseconds). */
  at: string;
  id: string;
}

/**
 * What a recovery resends (docs/integrators.md#the-delivery-log-resending-and-recovery): the webhook's `fallida` deliveries created in the window
 * that are not resends and have none yet, after `after` when given. Walks the partial index of
 * unsuccessful deliveries (webhook_id, estado, created_at, id), a resend found by
 * entregas_reenvio_de_idx.
 */
function recoverable(webhookId: string, window: RecoveryWindow, after: RecoveryPosition | undefined): RawBuilder<boolean> {
  return sql<boolean>`e.webhook_id = ${webhookId}
      and e.estado = 'fallida'
      and not e.es_reenvio
      and e.created_at >= ${window.desde} and e.created_at < ${window.hasta}
      and not exists (select 1 from entregas r where r.reenvio_de = e.id)
      ${after === undefined ? sql`` : sql`and (e.created_at, e.id) > (${after.at}::timestamptz, ${after.id}::uuid)`}`;
}

/**
 * Resends the oldest `limit` deliveries a recovery of the window takes (after `after`, the last of
 * the batch before), in one statement. Run it in the transaction that holds the webhook's lock
 * (`lockWebhook`): a recovery of the same webhook running at once waits for this batch's commit, and
 * its own statement then sees these resends, so it resends none of them again.
 */
export async function insertRecoveryResends(
  trx: Transaction,
  webhookId: string,
  window: RecoveryWindow,
  eventFields: EventFields,
  limit: number,
  after: RecoveryPosition | undefined,
): Promise<{ resends: Resent[]; last: RecoveryPosition | undefined }> {
  return insertResends(trx, recoverable(webhookId, window, after), eventFields, limit);
}

/**
 * Delivers what the webhook missed while it was inactive (`recuperar` with `omitidas`): the events
 * of the window, created since the webhook was and already fanned out (so the fan-out makes no
 * delivery of them any more), that the routing rule (`routesEvent`, the fan-out's, without
 * `activo`) gives it today and of which it has no delivery, the oldest `limit`, each as a new
 * delivery under its event's id. Run it in the transaction that holds the webhook's lock: a
 * second replay of the window finds these and makes none again.
 */
export async function insertOmittedDeliveries(trx: Transaction, webhookId: string, window: RecoveryWindow, limit: number): Promise<Resent[]> {
  const result = await sql<LoggedRow & { event_data: LoggedEventData; event_sequence: number | null; event_modo: Modo; particion_en: Date }>`
    with picked as (
      select w.id as webhook_id, o.id as evento_id, o.evento, o.data ->> 'numeroGuia' as numero_guia,
        o.data as event_data, o.secuencia as event_sequence, o.modo as event_modo, o.created_at as event_at
      from webhooks w
      join outbox o on o.empresa_id = w.empresa_id and o.created_at >= ${window.desde} and o.created_at < ${window.hasta} and o.created_at >= w.created_at
      where w.id = ${webhookId}
        and o.repartido_en is not null
        and ${routesEvent('w', {
          empresaId: sql.ref('o.empresa_id'),
          modo: sql.ref('o.modo'),
          sucursalId: sql.ref('o.sucursal_id'),
          evento: sql.ref('o.evento'),
          about: sql`(o.data -> 'webhook' ->> 'id')::uuid`,
        })}
        and not exists (select 1 from entregas e where e.evento_id = o.id and e.webhook_id = w.id)
      order by o.created_at, o.id
      limit ${limit}
    ), ins as (${insertOmittedOf('picked')})
    select ins.*, picked.event_data, picked.event_sequence, picked.event_modo
    from ins join picked on picked.evento_id = ins.evento_id
    order by picked.event_at, picked.evento_id
  `.execute(trx);
  return result.rows.map((r) => ({ ...toLogged(r), event: { data: r.event_data, sequence: r.event_sequence, modo: r.event_modo }, partitionAt: r.particion_en }));
}

/** How many deliveries a recovery of the window would still resend: its answer's `pendientes`. */
export async function countRecoverable(db: Db, webhookId: string, window: RecoveryWindow, eventFields: EventFields): Promise<number> {
  const { rows } = await sql<{ n: string }>`
    select count(*) as n
    from entregas e
    left join lateral ${eventFields('e.evento_id')} ev on true
    where ${recoverable(webhookId, window, undefined)} and ${EVENT_KEPT}
  `.execute(db);
  return Number(rows[0]?.n ?? 0);
}

/** A webhook's deliveries created since `since`, by state (its health's `ultimas24h`); PINGs, tests of the endpoint, left out. */
export async function deliveriesSince(db: Db, webhookId: string, since: Date, reader: LogReader = 'all'): Promise<Record<DeliveryState, number>> {
  const q = db
    .selectFrom('entregas')
    .select(['estado', (eb) => eb.fn.countAll<string>().as('n')])
    .where('webhook_id', '=', webhookId)
    .where('created_at', '>=', since)
    .where('evento', '<>', 'PING');
  const rows = await seenBy(q, reader).groupBy('estado').execute();
  const out: Record<DeliveryState, number> = { pendiente: 0, exitosa: 0, fallida: 0 };
  for (const r of rows) out[r.estado] = Number(r.n);
  return out;
}

// ---- the portal's summaries ------------------------------------------------------------------------

/** Deliveries of one hour of a company's webhooks of one mode, by how they ended. */
export interface HourlyDeliveries {
  /** The start of the hour. */
  hora: Date;
  modo: Modo;
  exitosas: number;
  fallidas: number;
}

/** A company's deliveries created since `since`, per hour and mode (the portal's 24-hour chart). */
export async function hourlyDeliveries(db: Db, empresaId: string, since: Date): Promise<HourlyDeliveries[]> {
  const { rows } = await sql<{ hora: Date; modo: Modo; exitosas: string; fallidas: string }>`
    select date_trunc('hour', e.created_at) as hora, w.modo,
      count(*) filter (where e.estado = 'exitosa') as exitosas,
      count(*) filter (where e.estado = 'fallida') as fallidas
    from webhooks w
    join entregas e on e.webhook_id = w.id and e.created_at >= ${since}
    where w.empresa_id = ${empresaId}
    group by 1, 2
  `.execute(db);
  return rows.map((r) => ({ hora: r.hora, modo: r.modo, exitosas: Number(r.exitosas), fallidas: Number(r.fallidas) }));
}

/** A company's deliveries that still have attempts left, per mode. */
export async function pendingDeliveriesByMode(db: Db, empresaId: string): Promise<Record<Modo, number>> {
  const { rows } = await sql<{ modo: Modo; n: string }>`
    select w.modo, count(*) as n
    from webhooks w
    join entregas e on e.webhook_id = w.id and e.estado = 'pendiente'
    where w.empresa_id = ${empresaId}
    group by 1
  `.execute(db);
  const out: Record<Modo, number> = { live: 0, test: 0 };
  for (const r of rows) out[r.modo] = Number(r.n);
  return out;
}

/** A delivery of a shipment's events, with the webhook it went to (the portal's sandbox page). */
export interface ShipmentDelivery extends LoggedDelivery {
  webhookId: string;
  url: string;
}

/**
 * Every delivery of one shipment's events to a company's webhooks of one mode, newest first (at most
 * `limit`). `since` is the shipment's creation: it bounds the walk of each webhook's deliveries on the
 * (webhook_id, created_at) index, so no index on numero_guia is needed (one would cost every delivery's insert).
 */
export async function deliveriesOfShipment(
  db: Db,
  shipment: { empresaId: string; modo: Modo; numeroGuia: string; since: Date },
  limit: number,
): Promise<ShipmentDelivery[]> {
  const { empresaId, modo, numeroGuia, since } = shipment;
  const rows = await db
    .selectFrom('entregas as e')
    .innerJoin('webhooks as w', 'w.id', 'e.webhook_id')
    .select([
      'e.id',
      'e.evento',
      'e.exitoso',
      'e.status_code',
      'e.intentos',
      'e.ultimo_intento_en',
      'e.created_at',
      'e.estado',
      'e.evento_id',
      'e.numero_guia',
      'e.reenvio_de',
      sql<string>`e.created_at::text`.as('at'),
      'w.id as webhook_id',
      'w.url',
    ])
    .where('w.empresa_id', '=', empresaId)
    .where('w.modo', '=', modo)
    .where('e.numero_guia', '=', numeroGuia)
    .where('e.created_at', '>=', since)
    .orderBy('e.created_at', 'desc')
    .orderBy('e.id', 'desc')
    .limit(limit)
    .execute();
  return rows.map((r) => ({ ...toLogged(r), webhookId: r.webhook_id, url: r.url }));
}
