import { sql, type RawBuilder } from 'kysely';
import { partitionRange, prepared, withinRange, type Db, type PartitionRange } from '@svc/platform';
import type { DeliveryState, Entrega } from '@svc/contracts';
import type { NullableColumns } from '../webhooks/webhook.repository';

/**
 * The dispatcher's reads of deliveries (`entregas`): what earlier runs of an event recorded, where a
 * batch stands, the overdue gauge. Every write (the fan-out's rows, attempts, claims, postponements,
 * retention) is the table module's (@svc/platform, tables/deliveries.table.ts).
 */

/** Where a delivery stands: its row's state and the attempts made so far, as read. */
export type DeliveryProgress = Pick<Entrega, 'estado' | 'intentos'>;

/** An event's way to one webhook, with the delivery an earlier run of the event recorded there, if any. */
export interface RoutedDelivery<W> {
  eventId: string;
  webhook: W;
  /** The event's original delivery to this webhook; null when none was recorded yet. */
  existing: (DeliveryProgress & { id: string }) | null;
}

/** A batch's routes, and each event's company webhook count as the read saw it. */
export interface Routing<W> {
  routes: RoutedDelivery<W>[];
  /** By event id: the count the routes were read at (`webhook_versions`, 0 before any webhook). */
  versions: Map<string, number>;
}

/**
 * The routes of a batch of events (`routed`: rows of event_id, webhooks_version and a webhook's
 * columns, among them its id, null where the event goes nowhere) with the original delivery each
 * already has, looked for in the events' days (`days`: an event's own deliveries are kept in its
 * day), in one read: a second run of an event (a stalled job, the reconciler's re-queue)
 * finds what the first one recorded.
 */
export async function findRoutedDeliveries<W extends { id: string }>(
  db: Db,
  routed: RawBuilder<NullableColumns<W> & { event_id: string; webhooks_version: string }>,
  days: PartitionRange,
): Promise<Routing<W>> {
  type Row = NullableColumns<W> & {
    event_id: string;
    webhooks_version: string;
    entrega_id: string | null;
    entrega_estado: DeliveryState | null;
    entrega_intentos: number | null;
  };
  // Prepared, so its generic plan, made on a connection's first run, outlives the statistics it was
  // made with (a plain join planned on a near-empty `entregas` kept scanning it as it grew). The
  // lateral subquery with its limit is not flattened: each route stays one probe of the unique index.
  const query = sql<Row>`
    with routed as (${routed})
    select r.*, e.id as entrega_id, e.estado as entrega_estado, e.intentos as entrega_intentos
    from routed r
    left join lateral (
      select e.id, e.estado, e.intentos from entregas e
      where e.evento_id = r.event_id and e.webhook_id = r.id and e.evento_id is not null and not e.es_reenvio
        and ${withinRange('e.particion_en', days)}
      limit 1
    ) e on true`;
  const result = await db.executeQuery<Row>(prepared('find_routed_deliveries', query, db));
  const routes: RoutedDelivery<W>[] = [];
  const versions = new Map<string, number>();
  for (const r of result.rows) {
    const { event_id, webhooks_version, entrega_id, entrega_estado, entrega_intentos, ...webhook } = r;
    versions.set(event_id, Number(webhooks_version));
    if (webhook.id === null) continue;
    routes.push({
      eventId: event_id,
      webhook: webhook as unknown as W,
      existing: entrega_id !== null && entrega_estado !== null && entrega_intentos !== null ? { id: entrega_id, estado: entrega_estado, intentos: entrega_intentos } : null,
    });
  }
  return { routes, versions };
}

/** A delivery found by its id, with its partition key when its job carries it. */
export interface DeliveryKey {
  id: string;
  partitionAt?: string | undefined;
}

/** Where each delivery of a batch stands, in one query on their days' partitions; unknown ids are simply absent. */
export async function findDeliveryProgress(db: Db, keys: readonly DeliveryKey[]): Promise<Map<string, DeliveryProgress>> {
  if (keys.length === 0) return new Map();
  const rows = await db
    .selectFrom('entregas')
    .select(['id', 'estado', 'intentos'])
    .where('id', '=', sql<string>`any(${sql.val([...new Set(keys.map((k) => k.id))])}::uuid[])`)
    .where(withinRange('particion_en', partitionRange(keys.map((k) => k.partitionAt))))
    .execute();
  return new Map(rows.map((r) => [r.id, { estado: r.estado, intentos: r.intentos }]));
}

/** Age in seconds of the most overdue pending delivery (0 when none is due): a gauge. */
export async function oldestOverdueAge(db: Db): Promise<number> {
  const row = await db
    .selectFrom('entregas')
    .select(sql<string | null>`extract(epoch from now() - min(proximo_intento_en))`.as('age'))
    .where('estado', '=', 'pendiente')
    .where('proximo_intento_en', '<', sql<Date>`now()`)
    .executeTakeFirstOrThrow();
  return row.age === null ? 0 : Math.max(0, Number(row.age));
}

/**
 * The deliveries among `ids` whose every attempt, `attempts` of them at least, answered `status`
 * (the GONE rule: 3 attempts, each a 410). Read only when a delivery has ended failed with that
 * status on its last attempt, so a healthy webhook never pays it.
 */
export async function answeredAlways(db: Db, ids: readonly string[], status: number, attempts: number): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const rows = await db
    .selectFrom('entrega_intentos')
    .select('entrega_id')
    .where('entrega_id', '=', sql<string>`any(${sql.val([...ids])}::uuid[])`)
    .groupBy('entrega_id')
    .having(sql<boolean>`count(*) >= ${attempts} and bool_and(status_code = ${status})`)
    .execute();
  return new Set(rows.map((r) => r.entrega_id));
}
