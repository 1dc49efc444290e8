import { randomUUID } from 'node:crypto';
import { sql, type RawBuilder } from 'kysely';
import { eventJobOf, guiaCreadaData, type Modo, type ShipmentEvent, type ShipmentEventData, type ShipmentEventJob } from '@svc/contracts';
import type { Db, Transaction } from '@svc/platform';
import type { CompanyScope } from '../companies/company-scope';
import { webhooksVersionOf } from '../webhooks/webhook.repository';

/**
 * An event about to be written: the job the relay will queue, less what its write adds
 * (`committedAt` at commit, `webhooksVersion` read by its statement).
 */
export type NewEvent = Omit<ShipmentEventJob, 'committedAt' | 'webhooksVersion' | 'sequence' | 'mode'> & { sequence: number; mode: Modo };

/** The job of a written event; the relay stamps `committedAt` once its transaction has committed. */
export type PendingJob = Omit<ShipmentEventJob, 'committedAt'>;

/** GUIA_CREADA is the first entry of its shipment's history, so its sequence is always 1. */
const CREATION_SEQUENCE = 1;

/** The event of a change to a shipment that `owner` owns, under a new id. */
export function shipmentEvent(
  owner: CompanyScope,
  requestId: string | null,
  change: { evento: ShipmentEvent; data: ShipmentEventData; sequence: number },
): NewEvent {
  return {
    eventId: randomUUID(),
    evento: change.evento,
    empresaId: owner.empresaId,
    sucursalId: owner.sucursalId,
    data: change.data,
    requestId,
    sequence: change.sequence,
    mode: owner.modo,
  };
}

/** A new shipment's GUIA_CREADA event (a sandbox shipment's goes to the test webhooks only). */
export function creationEvent(owner: CompanyScope, requestId: string | null, numeroGuia: string): NewEvent {
  return shipmentEvent(owner, requestId, { evento: 'GUIA_CREADA', data: guiaCreadaData(numeroGuia), sequence: CREATION_SEQUENCE });
}

/** The jobs of events a statement has written, with the company's webhook count it read. */
export function pendingJobs(events: readonly NewEvent[], webhooksVersion: number): PendingJob[] {
  return events.map((e) => ({ ...e, webhooksVersion }));
}

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
    .returning(['id', webhooksVersionOf(sql.ref('outbox.empresa_id')).as('webhooks_version')])
    .execute();
  const versions = new Map(rows.map((r) => [r.id, Number(r.webhooks_version)]));
  return events.map((e) => ({ ...e, webhooksVersion: versions.get(e.eventId) ?? 0 }));
}

export async function markSent(db: Db, ids: string[]): Promise<void> {
  if (ids.length === 0) return;
  await db
    .updateTable('outbox')
    .set({ enviado_en: sql<Date>`now()` })
    .where('id', '=', sql<string>`any(${sql.val(ids)}::uuid[])`)
    .where('enviado_en', 'is', null)
    .execute();
}

/** Locks a batch of committed-but-unsent events older than `minAgeMs`; other sweepers skip them. */
export async function lockUnsent(trx: Transaction, minAgeMs: number, limit: number): Promise<ShipmentEventJob[]> {
  const rows = await trx
    .selectFrom('outbox')
    .selectAll()
    .where('enviado_en', 'is', null)
    .where('created_at', '<', sql<Date>`now() - make_interval(secs => ${minAgeMs / 1000})`)
    .orderBy('created_at')
    .limit(limit)
    .forUpdate()
    .skipLocked()
    .execute();
  return rows.map(eventJobOf);
}

export async function pendingStats(db: Db): Promise<{ pending: number; oldestAgeSeconds: number }> {
  const row = await db
    .selectFrom('outbox')
    .select([
      sql<string>`count(*)`.as('pending'),
      sql<string | null>`extract(epoch from now() - min(created_at))`.as('age'),
    ])
    .where('enviado_en', 'is', null)
    .executeTakeFirstOrThrow();
  return { pending: Number(row.pending), oldestAgeSeconds: row.age === null ? 0 : Math.max(0, Number(row.age)) };
}

/**
 * The event whose id is in `column`, as a one-row subquery `(event_data, event_sequence, event_modo)`
 * (none once the event is gone), for a statement that writes its resends.
 */
export function eventFields(column: string): RawBuilder<unknown> {
  return sql`(select o.data as event_data, o.secuencia as event_sequence, o.modo as event_modo from outbox o where o.id = ${sql.ref(column)})`;
}
