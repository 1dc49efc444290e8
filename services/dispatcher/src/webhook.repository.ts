import { sql } from 'kysely';
import type { Db, ShipmentEvent } from '@svc/schema';
import { DELIVERY_ID_NAMESPACE } from './delivery-id';

export interface RoutableEvent {
  eventId: string;
  evento: ShipmentEvent;
  empresaId: string;
  /** The branch that generated the event, or null for the company. */
  sucursalId: string | null;
}

export interface RoutedDelivery {
  deliveryId: string;
  eventId: string;
  webhookId: string;
}

/**
 * The fan-out of a batch of events, in one statement: selects the active webhooks each event goes
 * to, inserts one delivery per (event, webhook) and returns the deliveries still pending.
 *
 * Routing: an event of the company reaches the webhooks with no branch; an event of a branch
 * reaches those and the branch's own (`sucursal_id = null` never matches, so a company event skips
 * branch webhooks). Subscription: an empty `eventos` takes every event.
 *
 * Ids are derived from (event, webhook) exactly as `deliveryIdFor` does, so a second run of the
 * same fan-out collides (ON CONFLICT DO NOTHING) and finds the rows of the first: the new rows come
 * from the insert, the earlier ones still pending from the snapshot the statement started with.
 */
export async function fanOutDeliveries(db: Db, events: readonly RoutableEvent[]): Promise<RoutedDelivery[]> {
  if (events.length === 0) return [];
  const result = await sql<{ id: string; evento_id: string; webhook_id: string }>`
    with routed as (
      select ev.event_id, ev.evento, w.id as webhook_id,
             md5(${DELIVERY_ID_NAMESPACE} || '/' || ev.event_id::text || '/' || w.id::text) as h
      from unnest(
        ${sql.val(events.map((e) => e.eventId))}::uuid[],
        ${sql.val(events.map((e) => e.evento))}::text[],
        ${sql.val(events.map((e) => e.empresaId))}::uuid[],
        ${sql.val(events.map((e) => e.sucursalId))}::uuid[]
      ) as ev(event_id, evento, empresa_id, sucursal_id)
      join webhooks w
        on w.empresa_id = ev.empresa_id
       and w.activo
       and (w.sucursal_id is null or w.sucursal_id = ev.sucursal_id)
       and (cardinality(w.eventos) = 0 or ev.evento = any(w.eventos))
    ), v as (
      select overlay(overlay(h placing '3' from 13 for 1)
                     placing substr('89ab', (('x' || substr(h, 17, 1))::bit(4)::int & 3) + 1, 1) from 17 for 1)::uuid as id,
             event_id, evento, webhook_id
      from routed
    ), ins as (
      insert into entregas (id, webhook_id, evento_id, evento)
      select id, webhook_id, event_id, evento from v
      on conflict do nothing
      returning id, evento_id, webhook_id
    )
    select id, evento_id, webhook_id from ins
    union all
    select e.id, e.evento_id, e.webhook_id from entregas e join v on v.id = e.id where e.estado = 'pendiente'
  `.execute(db);
  return result.rows.map((r) => ({ deliveryId: r.id, eventId: r.evento_id, webhookId: r.webhook_id }));
}

export interface WebhookTarget {
  id: string;
  url: string;
  /** The signing key: never log it. */
  secret: string;
  activo: boolean;
}

/** The targets of a batch of webhooks, in one query. */
export async function findWebhookTargets(db: Db, ids: readonly string[]): Promise<Map<string, WebhookTarget>> {
  if (ids.length === 0) return new Map();
  const rows = await db
    .selectFrom('webhooks')
    .select(['id', 'url', 'secret', 'activo'])
    .where('id', '=', sql<string>`any(${sql.val([...ids])}::uuid[])`)
    .execute();
  return new Map(rows.map((r) => [r.id, r]));
}
