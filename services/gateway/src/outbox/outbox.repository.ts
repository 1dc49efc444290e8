import { randomUUID } from 'node:crypto';
import { sql, type RawBuilder } from 'kysely';
import { eventJobOf, guiaCreadaData, type ShipmentEvent, type ShipmentEventData, type ShipmentEventJob } from '@svc/contracts';
import type { Db, NewEvent, PendingJob, Transaction } from '@svc/platform';
import type { CompanyScope } from '../companies/company-scope';

/**
 * The gateway's side of the event log (`outbox`): the events its changes make, and its reads of the
 * log (the relay's sweep, the backlog, a resend's event). Every write is the table module's
 * (@svc/platform, tables/outbox.table.ts): the events' insert, their `enviado_en`.
 */

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

/**
 * The jobs of events a statement has written, with the company's webhook count it read and the
 * events' creation (their rows' partition key: the statement's `now()`, the transaction's start).
 */
export function pendingJobs(events: readonly NewEvent[], webhooksVersion: number, createdAt: Date): PendingJob[] {
  const partitionAt = createdAt.toISOString();
  return events.map((e) => ({ ...e, webhooksVersion, partitionAt }));
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
