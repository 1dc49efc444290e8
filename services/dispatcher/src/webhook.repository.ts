import { sql } from 'kysely';
import type { Db, ShipmentEvent } from '@svc/schema';

export interface RoutableEvent {
  eventId: string;
  evento: ShipmentEvent;
  empresaId: string;
  /** The branch that generated the event, or null for the company. */
  sucursalId: string | null;
}

/**
 * The active webhooks each event goes to, for a batch of events in one query. Routing: an event of
 * the company reaches the webhooks with no branch; an event of a branch reaches those and the
 * branch's own (`sucursal_id = null` never matches, so a company event skips branch webhooks).
 * Subscription: an empty `eventos` takes every event.
 */
export async function routeEvents(db: Db, events: readonly RoutableEvent[]): Promise<Array<{ eventId: string; webhookId: string }>> {
  if (events.length === 0) return [];
  const result = await sql<{ event_id: string; webhook_id: string }>`
    select ev.event_id, w.id as webhook_id
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
    order by ev.event_id, w.created_at, w.id
  `.execute(db);
  return result.rows.map((r) => ({ eventId: r.event_id, webhookId: r.webhook_id }));
}
