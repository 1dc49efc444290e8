import type { Job } from 'bullmq';
import { bulkJobs, JOBS, type DeliveryJob } from '@svc/contracts';
import { validPayload } from '@svc/platform';
import { isUnopened, type ReadTarget } from '../webhooks/webhook.repository';
import { createDeliveryContext, drainContext, type DeliveryDeps, type DeliveryOptions } from './delivery.context';
import type { DeliveryStep, OwnJob } from './delivery.states';
import { prepare } from './prepare.stage';
import { send } from './send.stage';
import { recordAttempt, recordEvent } from './record.stage';
import { settle } from './settle.stage';

/** An event's deliveries, as the fan-out found them from its routes. */
export interface EventDeliveries {
  eventId: string;
  /** Null for a notice. */
  numeroGuia: string | null;
  /** The event's row's partition key, as its job carries it. */
  partitionAt?: string | undefined;
  /** Deliveries with no row yet, each with its webhook's target: their first attempts. */
  fresh: Array<{ delivery: DeliveryJob; target: ReadTarget }>;
  /** Recorded before their first attempt (deferred, or by an earlier version), with no job of their own. */
  unsent: DeliveryJob[];
  /** Past their first attempt: the job of their next one, queued again (a no-op while Redis holds it). */
  retries: DeliveryJob[];
}

export interface DeliveryPipeline {
  /**
   * The delivery worker's processor: one attempt of the job's delivery. A job whose webhook has no
   * free slot ends with its due time recorded; the deferral scheduler queues it again from
   * Postgres at its turn: neither the job's attempts nor the delivery's are spent.
   */
  deliverJob(job: Job<unknown>, token?: string): Promise<DeliveryStep>;
  /**
   * The fan-out's, once per event: every first attempt the event owes, recorded together with the
   * event; the deliveries that have rows go through their own attempt as a job's would.
   */
  deliverEvent(event: EventDeliveries): Promise<void>;
  /** Runs every record still batched; called once the workers have stopped. */
  drain(): Promise<void>;
}

/**
 * Every attempt goes through four stages (delivery.states.ts names what each hands the next):
 * prepare (is it owed, and where to) → send → record → settle. Postgres says where a delivery
 * stands, so a job run twice sends nothing twice; a receiver's failure is recorded with its next
 * attempt's due time (retry-policy/delivery-retry.policy.ts) and that job queued at once, never
 * failing a job. A fault reading Postgres
 * throws, and BullMQ's retries (which count no attempt) run the job again; a fault recording waits
 * with the outcome in hand. Whatever Redis loses, the reconciler queues again from the record.
 */
export function createDeliveryPipeline(deps: DeliveryDeps, options: DeliveryOptions = {}): DeliveryPipeline {
  const ctx = createDeliveryContext(deps, options);

  /** An attempt on a delivery that has a row, through every stage. */
  async function deliverRecorded(delivery: DeliveryJob, ownJob: OwnJob | null, untouched: boolean): Promise<DeliveryStep> {
    const prepared = await prepare(ctx, { delivery, ownJob, untouched });
    if (prepared.stage === 'ended') return prepared.step;
    const attempted = await send(ctx, prepared);
    const recorded = await recordAttempt(ctx, attempted);
    return settle(ctx, recorded);
  }

  return {
    deliverJob(job, token) {
      const delivery = validPayload(JOBS.delivery, job);
      const untouched = delivery.fresh === true && delivery.attempt === 1 && job.attemptsMade === 0 && (job.attemptsStarted ?? 1) <= 1;
      return deliverRecorded(delivery, { job, token }, untouched);
    },

    async deliverEvent(event) {
      if (event.retries.length > 0) await ctx.deliveryQueue.addBulk(bulkJobs(JOBS.delivery, event.retries));
      // Every attempt runs to its end before the event's job does: one failing must not end the
      // job while the others are still sending.
      const [firsts, others] = await Promise.all([
        // A target whose secret did not open is not sent to: it fails like a throwing attempt.
        Promise.allSettled(
          event.fresh.map(({ delivery, target }) =>
            isUnopened(target) ? Promise.reject(target.unopened) : send(ctx, { stage: 'ready', delivery, target, row: 'new', ownJob: null }),
          ),
        ),
        Promise.allSettled(event.unsent.map((delivery) => deliverRecorded(delivery, null, false))),
      ]);
      const attempted = firsts.flatMap((f) => (f.status === 'fulfilled' ? [f.value] : []));
      // The event is fanned out once every delivery it owes is recorded: if a first attempt threw,
      // it stays owed and its job's next run (or the reconciler) makes that one.
      const complete = attempted.length === event.fresh.length;
      const recorded = await recordEvent(ctx, { eventId: event.eventId, numeroGuia: event.numeroGuia, complete, partitionAt: event.partitionAt }, attempted);
      const settled = await Promise.allSettled(recorded.map((r) => settle(ctx, r)));

      const failed = [...firsts, ...others, ...settled].find((s): s is PromiseRejectedResult => s.status === 'rejected');
      if (failed) throw failed.reason;
    },

    drain: () => drainContext(ctx),
  };
}
