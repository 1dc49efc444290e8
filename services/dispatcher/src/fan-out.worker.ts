import type { Job, Queue } from 'bullmq';
import type { Logger } from '@svc/observability';
import { JOBS, type Db, type DeliveryJob, type ShipmentEventJob } from '@svc/schema';
import { insertDeliveries } from '@svc/webhook-sender';
import { createMicroBatcher, type MicroBatcher } from './micro-batch';
import { deliveryIdFor } from './delivery-id';
import { routeEvents } from './webhook.repository';

export interface FanOut {
  /** The processor of the shipment-events queue: resolves with the number of deliveries queued. */
  process(job: Job<ShipmentEventJob>): Promise<number>;
  drain(): Promise<void>;
}

/**
 * Turns each event into one delivery per routed, subscribed, active webhook: a row in `entregas`
 * (deterministic id, so a re-run finds the same rows) and a job in the deliveries queue (job id =
 * delivery id, so a re-add is a no-op). Events taken together are handled in one batch: one
 * routing query, one insert, one addBulk. A failure fails the batch's jobs, and BullMQ retries them.
 */
export function createFanOut(deps: { db: Db; deliveryQueue: Pick<Queue<DeliveryJob>, 'addBulk'>; logger: Logger }): FanOut {
  const { db, deliveryQueue } = deps;

  const batcher: MicroBatcher<ShipmentEventJob, number> = createMicroBatcher(
    async (events) => {
      // A stalled job can be run twice at once; one entry per event is enough.
      const unique = [...new Map(events.map((e) => [e.eventId, e])).values()];
      const routed = await routeEvents(db, unique);
      const byId = new Map(unique.map((e) => [e.eventId, e]));
      const rows = routed.map((r) => {
        const event = byId.get(r.eventId)!;
        return { id: deliveryIdFor(r.eventId, r.webhookId), webhookId: r.webhookId, eventId: r.eventId, evento: event.evento };
      });
      const pending = await insertDeliveries(db, rows);
      const jobs = rows
        .filter((r) => pending.has(r.id))
        .map((r) => {
          const event = byId.get(r.eventId)!;
          const data: DeliveryJob = {
            deliveryId: r.id,
            webhookId: r.webhookId,
            eventId: r.eventId,
            evento: event.evento,
            data: event.data,
            committedAt: event.committedAt,
            requestId: event.requestId,
          };
          return { name: JOBS.delivery.name, data, opts: { ...JOBS.delivery.options, jobId: r.id } };
        });
      if (jobs.length > 0) await deliveryQueue.addBulk(jobs);
      const perEvent = new Map<string, number>();
      for (const j of jobs) perEvent.set(j.data.eventId, (perEvent.get(j.data.eventId) ?? 0) + 1);
      return events.map((e) => perEvent.get(e.eventId) ?? 0);
    },
    { maxBatch: 200, maxInFlight: 2 },
  );

  return {
    process: (job) => batcher.submit(job.data),
    drain: () => batcher.drain(),
  };
}
