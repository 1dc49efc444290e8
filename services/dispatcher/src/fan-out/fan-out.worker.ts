import type { Job, Queue } from 'bullmq';
import { bulkJobs, deliveryJobOf, JOBS, validPayload, type Db, type DeliveryJob, type ShipmentEventJob } from '@svc/schema';
import { createMicroBatcher } from '../support/micro-batch';
import { insertDeliveries, type PendingDelivery } from '../deliveries/delivery.repository';
import type { DeliveryProcessor } from '../deliveries/delivery.worker';
import { subscribedWebhooks } from '../webhooks/webhook.repository';
import { markFannedOut } from '../events/event.repository';

export interface FanOut {
  /** The processor of the shipment-events queue: resolves with the number of deliveries it found owed. */
  process(job: Job<unknown>): Promise<number>;
  drain(): Promise<void>;
}

/**
 * How long a delivery the fan-out creates stays due later than now: its first attempt is made at
 * once, in the event's job, and is recorded well within this (the sender's hard deadline is 5 s),
 * so the reconciler does not queue it again while it is in flight. A crash leaves it overdue after
 * this (and the event's job runs again after the lock duration anyway).
 */
export const FIRST_ATTEMPT_LEASE_MS = 10_000;

/**
 * Turns each event into one delivery per routed, subscribed, active webhook of the event's mode,
 * and makes each delivery's first attempt itself: one queue hop per delivery. (Issue 16: the
 * alternative, the gateway's relay fanning out, would put the webhooks' reads and the deliveries'
 * rows on the gateway, which scales with the API, and would queue one job per webhook instead of
 * one per event; here an event's job carries all its webhooks' first attempts, and only retries and
 * deferrals go through the deliveries queue.)
 *
 * A delivery is a row in `entregas` (unique per event and webhook, so a re-run finds the same
 * rows), recorded in the statement that marks the event fanned out. Events taken together are
 * handled in one batch: one statement. A failure to record fails the batch's jobs, and BullMQ
 * retries them; a re-run finds its rows (not fresh), reads where each stands and sends only what
 * was not made. A delivery already past its first attempt (a re-run after its retry was queued)
 * has its job queued again under the same job id, a no-op while Redis still holds it.
 */
export function createFanOut(deps: {
  db: Db;
  deliveries: Pick<DeliveryProcessor, 'attempt'>;
  deliveryQueue: Pick<Queue<DeliveryJob>, 'addBulk'>;
}): FanOut {
  const { db, deliveries, deliveryQueue } = deps;

  const batcher = createMicroBatcher<ShipmentEventJob, PendingDelivery[]>(
    async (events) => {
      // A stalled job can be run twice at once; one entry per event is enough.
      const byId = new Map(events.map((e) => [e.eventId, e]));
      // An event queued before events carried a mode is live: only live shipments emitted then.
      const routable = [...byId.values()].map((e) => ({ ...e, numeroGuia: e.data.numeroGuia, mode: e.mode ?? 'live' }));
      const pending = await insertDeliveries(db, subscribedWebhooks(routable), markFannedOut([...byId.keys()]), FIRST_ATTEMPT_LEASE_MS);
      const perEvent = new Map<string, PendingDelivery[]>();
      for (const p of pending) {
        const list = perEvent.get(p.eventId);
        if (list) list.push(p);
        else perEvent.set(p.eventId, [p]);
      }
      return events.map((e) => perEvent.get(e.eventId) ?? []);
    },
    { maxBatch: 200, maxInFlight: 2 },
  );


  async function process(job: Job<unknown>): Promise<number> {
    const event = validPayload(JOBS.shipmentEvent, job);
    const pending = await batcher.submit(event);
    const later = pending.filter((p) => p.attempt > 1).map((p) => deliveryJobOf(event, p));
    if (later.length > 0) await deliveryQueue.addBulk(bulkJobs(JOBS.delivery, later));
    // Every first attempt runs to its end before the job does: one failing (Postgres away) must
    // not end the job while the others are still sending.
    const made = await Promise.allSettled(pending.filter((p) => p.attempt === 1).map((p) => deliveries.attempt(deliveryJobOf(event, p), p.fresh)));
    const failed = made.find((m): m is PromiseRejectedResult => m.status === 'rejected');
    if (failed) throw failed.reason;
    return pending.length;
  }

  return { process, drain: () => batcher.drain() };
}
