import { sql, type RawBuilder } from 'kysely';
import type { Modo, NoticeEvent, ShipmentEventJob, WebhookNoticeData } from '@svc/contracts';
import type { Db, Transaction } from '../database';
import { partitionName, partitionRange, withinRange } from '../partitions';
import { webhooksVersionOf } from './webhooks.table';

/**
 * The one writer of the event log (`outbox`): the gateway writes events with their change and marks
 * them relayed; the dispatcher marks them fanned out, and its retention keeps the events resends still name. Reads stay with
 * each service's own repository.
 */

/**
 * An event about to be written: the job the relay will queue, less what its write adds
 * (`committedAt` at commit, `webhooksVersion` read by its statement).
 */
export type NewEvent = Omit<ShipmentEventJob, 'committedAt' | 'webhooksVersion' | 'sequence' | 'mode'> & { sequence: number; mode: Modo };

/** The job of a written event; the relay stamps `committedAt` once its transaction has committed. */
export type PendingJob = Omit<ShipmentEventJob, 'committedAt'>;

/** An event's outbox row: every writer of events goes through it. */
function rowOf(e: NewEvent) {
  return {
    id: e.eventId,
    empresa_id: e.empresaId,
    sucursal_id: e.sucursalId,
    evento: e.evento,
    data: e.data,
    request_id: e.requestId,
    secuencia: e.sequence,
    modo: e.mode,
  };
}

// The columns `rowOf` fills, in its order, and their types for a statement that reads them from parameters.
const INSERT_INTO = sql`insert into outbox (id, empresa_id, sucursal_id, evento, data, request_id, secuencia, modo)`;
const AS_RECORD = sql`e(id uuid, empresa_id uuid, sucursal_id uuid, evento text, data jsonb, request_id text, secuencia int, modo text)`;

/**
 * The insert of `events` inside a statement that writes their change too (the creation): written
 * only if the CTE `after` has rows, so a refused change writes no event. One event is written from
 * plain parameters, several from one JSON array, so the statement's text does not depend on how
 * many there are (it runs prepared).
 */
export function insertEventsSql(events: readonly NewEvent[], after: string): RawBuilder<unknown> {
  const [only] = events;
  if (events.length === 1 && only) {
    const r = rowOf(only);
    return sql`${INSERT_INTO}
      select ${r.id}::uuid, ${r.empresa_id}::uuid, ${r.sucursal_id}::uuid, ${r.evento}::text, ${JSON.stringify(r.data)}::jsonb,
        ${r.request_id}::text, ${r.secuencia}::int, ${r.modo}::text
      from ${sql.table(after)}`;
  }
  return sql`${INSERT_INTO}
    select e.* from jsonb_to_recordset(${JSON.stringify(events.map(rowOf))}::jsonb) as ${AS_RECORD}
    where exists (select 1 from ${sql.table(after)})`;
}

/**
 * Writes events in the caller's transaction (the one that makes the change); returns their jobs,
 * each with its company's webhook count as this statement read it.
 */
export async function insertEvents(trx: Transaction, events: readonly NewEvent[]): Promise<PendingJob[]> {
  if (events.length === 0) return [];
  const rows = await trx
    .insertInto('outbox')
    .values(events.map((e) => ({ ...rowOf(e), data: JSON.stringify(e.data) })))
    .returning(['id', 'created_at', webhooksVersionOf(sql.ref('outbox.empresa_id')).as('webhooks_version')])
    .execute();
  const written = new Map(rows.map((r) => [r.id, r]));
  return events.map((e) => {
    const row = written.get(e.eventId);
    return { ...e, webhooksVersion: Number(row?.webhooks_version ?? 0), ...(row ? { partitionAt: row.created_at.toISOString() } : {}) };
  });
}

/** A notice about one of a company's webhooks (extensions.md, Endpoint health): an event of the log with no shipment. */
export interface NewNotice {
  eventId: string;
  evento: NoticeEvent;
  empresaId: string;
  /** The webhook's branch: the notice is routed as that branch's events are. */
  sucursalId: string | null;
  /** The webhook's mode: only webhooks of that mode receive it. */
  mode: Modo;
  data: WebhookNoticeData;
}

/**
 * Writes a notice in the caller's transaction (the one that decided it), marked relayed: the writer
 * queues its job right after the commit, and if that fails the reconciler finds it not fanned out.
 * No sequence: a notice is in no shipment's history (no `X-SVC-Secuencia`, like a PING).
 */
export async function insertNotice(trx: Transaction, n: NewNotice): Promise<PendingJob> {
  const row = await trx
    .insertInto('outbox')
    .values({
      id: n.eventId,
      empresa_id: n.empresaId,
      sucursal_id: n.sucursalId,
      evento: n.evento,
      data: JSON.stringify(n.data),
      request_id: null,
      secuencia: null,
      modo: n.mode,
      enviado_en: sql<Date>`now()`,
    })
    .returning(['created_at', webhooksVersionOf(sql.ref('outbox.empresa_id')).as('webhooks_version')])
    .executeTakeFirstOrThrow();
  return {
    eventId: n.eventId,
    evento: n.evento,
    empresaId: n.empresaId,
    sucursalId: n.sucursalId,
    data: n.data,
    requestId: null,
    mode: n.mode,
    webhooksVersion: Number(row.webhooks_version),
    partitionAt: row.created_at.toISOString(),
  };
}

/** An event found by its id, with its row's partition key when its job carries it. */
export interface EventKey {
  eventId: string;
  partitionAt?: string | undefined;
}

/** Marks events relayed (queued for the dispatcher), the first time only; only their days' partitions are touched. */
export async function markSent(db: Db, events: readonly EventKey[]): Promise<void> {
  if (events.length === 0) return;
  await db
    .updateTable('outbox')
    .set({ enviado_en: sql<Date>`now()` })
    .where('id', '=', sql<string>`any(${sql.val(events.map((e) => e.eventId))}::uuid[])`)
    .where(withinRange('created_at', partitionRange(events.map((e) => e.partitionAt))))
    .where('enviado_en', 'is', null)
    .execute();
}

/**
 * Marks the events fanned out (the first time only), as a fragment of the statement that records
 * their deliveries; returns each event's id and its creation (its deliveries' partition key). The
 * row is found by its id and its day (`partitionRange`), not by its state: that statement runs on a generic plan
 * (prepared, planned once per connection), and with `repartido_en is null` in the filter that plan
 * also walked `outbox_sin_repartir_idx`, every event not yet fanned out, at each run.
 */
export function markFannedOut(events: readonly EventKey[]): RawBuilder<{ id: string; created_at: Date }> {
  return sql`
    update outbox set repartido_en = coalesce(repartido_en, now())
    where id = any(${sql.val(events.map((e) => e.eventId))}::uuid[])
      and ${withinRange('created_at', partitionRange(events.map((e) => e.partitionAt)))}
    returning id, created_at`;
}

/**
 * Retention's check of one day of events (`outboxDay`, a partition of `outbox`, which the caller
 * holds locked): true while it holds owed work: an event not yet relayed or fanned out (along the
 * two partial indexes of those), or one that a pending delivery of any day (a resend) still sends
 * (along the pending deliveries' index, each probing the day's events by id).
 */
export async function outboxDayOwed(trx: Transaction, outboxDay: RawBuilder<unknown>): Promise<boolean> {
  const { rows } = await sql`
    select 1 from ${outboxDay} where enviado_en is null or repartido_en is null
    union all
    select 1 from entregas e join ${outboxDay} o on o.id = e.evento_id where e.estado = 'pendiente'
    limit 1`.execute(trx);
  return rows.length > 0;
}

/**
 * Before `day`'s events are dropped: those that resends of later days still name move to the day of
 * the oldest such resend (their `created_at` becomes its partition key), so an event is kept as
 * long as a delivery names it, as before partitions: a resend of that resend, and a branch reading
 * the log (whose events it sees by their row), still find it. Resends are few: the statement walks
 * their index (`entregas_reenvio_evento_idx`) and probes the day by id. Returns how many moved.
 */
export async function keepEventsResendsName(trx: Transaction, day: Date): Promise<number> {
  const end = new Date(day.getTime() + 86_400_000);
  const result = await sql`
    update outbox o set created_at = m.at
    from (
      select r.evento_id, min(r.particion_en) as at
      from entregas r join ${sql.table(partitionName('outbox', day))} d on d.id = r.evento_id
      where r.es_reenvio and r.particion_en >= ${end}
      group by r.evento_id
    ) m
    where o.id = m.evento_id and o.created_at >= ${day} and o.created_at < ${end}`.execute(trx);
  return Number(result.numAffectedRows ?? 0);
}
