import { randomUUID } from 'node:crypto';
import { sql, type RawBuilder } from 'kysely';
import {
  eventJobOf,
  type Db,
  type Modo,
  type ShipmentEvent,
  type ShipmentEventData,
  type ShipmentEventJob,
  type Transaction,
} from '@svc/schema';
import { webhooksVersionSql } from '../webhooks/webhook.repository';

export interface NewEvent {
  evento: ShipmentEvent;
  empresaId: string;
  sucursalId: string | null;
  data: ShipmentEventData;
  requestId: string | null;
  /** Its position in the shipment's history, counted in the transaction that holds the shipment's lock. */
  sequence: number;
  mode: Modo;
}

export type PendingJob = Omit<ShipmentEventJob, 'committedAt'>;

/**
 * The insert of outbox rows from `select` (columns: id, empresa_id, sucursal_id, evento, data,
 * request_id, secuencia, modo), for a statement that writes a change and its events at once (the
 * creation).
 */
export const outboxInsert = (select: string): string =>
  `insert into outbox (id, empresa_id, sucursal_id, evento, data, request_id, secuencia, modo) ${select}`;

/**
 * Writes events in the caller's transaction (the one that makes the change); returns their jobs,
 * each with its company's webhook count as this statement read it.
 */
export async function insertEvents(trx: Transaction, events: NewEvent[]): Promise<PendingJob[]> {
  if (events.length === 0) return [];
  const jobs: PendingJob[] = events.map((e) => ({ eventId: randomUUID(), ...e }));
  const rows = await trx
    .insertInto('outbox')
    .values(
      jobs.map((j) => ({
        id: j.eventId,
        empresa_id: j.empresaId,
        sucursal_id: j.sucursalId,
        evento: j.evento,
        data: JSON.stringify(j.data),
        request_id: j.requestId,
        secuencia: j.sequence,
        modo: j.mode,
      })),
    )
    .returning(['id', sql<string>`${sql.raw(webhooksVersionSql('outbox.empresa_id'))}`.as('webhooks_version')])
    .execute();
  const versions = new Map(rows.map((r) => [r.id, Number(r.webhooks_version)]));
  return jobs.map((j) => ({ ...j, webhooksVersion: versions.get(j.eventId) ?? 0 }));
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
 * The event whose id is in `column`, as a one-row subquery `(event_data, event_sequence, event_mode)`
 * (none once the event is gone), for a statement that writes its resends.
 */
export function eventFields(column: string): RawBuilder<unknown> {
  return sql`(select o.data as event_data, o.secuencia as event_sequence, o.modo as event_mode from outbox o where o.id = ${sql.ref(column)})`;
}
