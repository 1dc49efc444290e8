import type pg from 'pg';
import { NOTICE_EVENTS } from '@svc/contracts';

/**
 * What the chaos suite expects, read from the record rather than from the API's answers: every
 * event committed to `outbox` owes one delivery to each webhook that should get it, whether or not
 * the request that committed it was answered (a fault can lose the answer after the commit).
 *
 * Which webhooks should get an event is the contract's rule, written here on its own (not the
 * dispatcher's query): the webhooks of the event's company that are active, of the event's mode,
 * of no branch or of the event's branch, and subscribed to the event (an empty `eventos` takes
 * every event). The scenarios do not change their webhooks while events flow, so the webhooks as
 * they are now are the webhooks as they were at each commit.
 */
export interface OwedDelivery {
  eventId: string;
  evento: string;
  numeroGuia: string;
  webhookId: string;
  /** The webhook's URL path, which is how the receiver tells the webhooks apart. */
  path: string;
  /** The delivery `entregas` records for this (event, webhook), if any: its id and state. */
  deliveryId: string | null;
  estado: string | null;
}

export async function owedDeliveries(pool: pg.Pool): Promise<OwedDelivery[]> {
  const { rows } = await pool.query<{
    event_id: string;
    evento: string;
    numero_guia: string;
    webhook_id: string;
    url: string;
    delivery_id: string | null;
    estado: string | null;
  }>(
    `select o.id as event_id, o.evento, o.data->>'numeroGuia' as numero_guia, w.id as webhook_id, w.url,
            e.id as delivery_id, e.estado
     from outbox o
     join webhooks w on w.empresa_id = o.empresa_id
       and w.activo
       and w.modo = o.modo
       and (w.sucursal_id is null or w.sucursal_id = o.sucursal_id)
       and case
         -- A notice (WEBHOOK_FALLANDO, WEBHOOK_DESACTIVADO) is owed only to the webhooks that list it
         -- by name, never to the one it is about; a shipment event to the empty lists too.
         when o.evento = any($1::text[]) then o.evento = any(w.eventos) and w.id::text is distinct from o.data->'webhook'->>'id'
         else cardinality(w.eventos) = 0 or o.evento = any(w.eventos)
       end
     left join entregas e on e.evento_id = o.id and e.webhook_id = w.id and not e.es_reenvio`,
    [NOTICE_EVENTS],
  );
  return rows.map((r) => ({
    eventId: r.event_id,
    evento: r.evento,
    numeroGuia: r.numero_guia,
    webhookId: r.webhook_id,
    path: new URL(r.url).pathname,
    deliveryId: r.delivery_id,
    estado: r.estado,
  }));
}

/** Work the record still owes: events never fanned out, deliveries still `pendiente`. */
export interface StuckWork {
  unfanned: number;
  pending: number;
}

export async function stuckWork(pool: pg.Pool): Promise<StuckWork> {
  const { rows } = await pool.query<{ unfanned: number; pending: number }>(
    `select (select count(*) from outbox where repartido_en is null)::int as unfanned,
            (select count(*) from entregas where estado = 'pendiente')::int as pending`,
  );
  return rows[0]!;
}
