import type { Job, Queue } from 'bullmq';
import { bulkJobs, JOBS, validPayload, type Db, type DeliveryJob, type ShipmentEventJob } from '@svc/schema';
import { createMicroBatcher } from '../support/micro-batch';
import { insertDeliveries } from '../deliveries/delivery.repository';
import { subscribedWebhooks } from '../webhooks/webhook.repository';
import { markFannedOut } from '../events/event.repository';

export interface FanOut {
  /** The processor of the shipment-events queue: resolves with the number of deliveries queued. */
  process(job: Job<unknown>): Promise<number>;
  drain(): Promise<void>;
}

/**
 * Turns each event into one delivery per routed, subscribed, active webhook: a row in `entregas`
 * (unique per event and webhook, so a re-run finds the same rows), recorded in the statement that
 * marks the event fanned out, and a job in the deliveries queue (job id = delivery id and attempt,
 * so a re-add is a no-op), so that each webhook's retries are its own.
 * Events taken together are handled in one batch: one statement, one addBulk. A failure fails the
 * batch's jobs, and BullMQ retries them.
 */
export function createFanOut(deps: { db: Db; deliveryQueue: Pick<Queue<DeliveryJob>, 'addBulk'> }): FanOut {
  const { db, deliveryQueue } = deps;

  const batcher = createMicroBatcher<ShipmentEventJob, number>(
    async (events) => {
      // A stalled job can be run twice at once; one entry per event is enough.
      const byId = new Map(events.map((e) => [e.eventId, e]));
      const unique = [...byId.values()];
      const routable = unique.map((e) => ({ ...e, numeroGuia: e.data.numeroGuia }));
      const pending = await insertDeliveries(db, subscribedWebhooks(routable), markFannedOut([...byId.keys()]));
      const perEvent = new Map<string, number>();
      const deliveries = pending.map((p): DeliveryJob => {
        const event = byId.get(p.eventId)!;
        perEvent.set(p.eventId, (perEvent.get(p.eventId) ?? 0) + 1);
        return {
          deliveryId: p.deliveryId,
          attempt: p.attempt,
          ...(p.fresh ? { fresh: true } : {}),
          webhookId: p.webhookId,
          eventId: p.eventId,
          evento: event.evento,
          data: event.data,
          committedAt: event.committedAt,
          requestId: event.requestId,
        };
      });
      if (deliveries.length > 0) await deliveryQueue.addBulk(bulkJobs(JOBS.delivery, deliveries));
      return events.map((e) => perEvent.get(e.eventId) ?? 0);
    },
    { maxBatch: 200, maxInFlight: 2 },
  );

  return {
    process: (job) => batcher.submit(validPayload(JOBS.shipmentEvent, job)),
    drain: () => batcher.drain(),
  };
}
