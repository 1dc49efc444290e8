import { claimDeferred, createPeriodicTask, type Db, type ShardedQueue } from '@svc/platform';
import type { Logger } from '@svc/observability';
import type { DeliveryJob, EventName } from '@svc/contracts';
import { queueClaimedDeliveries, reportOrphaned, type Requeueing } from './reconciler';

export interface DeferralScheduler {
  start(): void;
  /** One pass now: how many deliveries it queued. */
  runOnce(): Promise<number>;
  stop(): Promise<void>;
}

export interface DeferralSchedulerOptions {
  db: Db;
  /** Every shard's: the bound counts them all, and each delivery is queued on its company's shard. */
  deliveryQueue: Requeueing<DeliveryJob> & Pick<ShardedQueue<DeliveryJob>, 'getJobCounts'>;
  logger: Logger;
  /** Counts a delivery ended as failed because its event row is gone (svc_webhook_deliveries_total). */
  failed?: (event: EventName) => void;
  /** How often it looks. Default SCHEDULER_INTERVAL_MS. */
  intervalMs?: number;
  /** Waiting and delayed delivery jobs past which nothing more is queued. Default QUEUED_BOUND. */
  queuedBound?: number;
}

/**
 * How often due deferrals are looked for: a deferral lasts at least 20 ms (the limiter's shortest),
 * and a retry deferred for want of a slot must still go out within the contract's tolerance.
 */
export const SCHEDULER_INTERVAL_MS = 100;

/**
 * Redis runs noeviction, so the delivery queue's waiting and delayed jobs are kept under this many
 * by what the scheduler adds: several rounds of every slot of a dispatcher, so slots never starve,
 * while the rest of the deferred work waits in Postgres (the record, indexed by due time).
 */
export const QUEUED_BOUND = 2000;

/** Rows claimed per pass at most: a short statement holding its locks briefly. */
const SCHEDULER_BATCH = 200;

/**
 * Queues deferred attempts when they fall due. A deferral does not put its job back in Redis: its
 * due time is in `entregas` (a pending row's `proximo_intento_en`, marked `diferida`) and its job
 * ends; this loop claims due deferred rows oldest first (skip locked, so any number of dispatchers
 * run it), clearing the mark, and queues each one's next attempt under its deterministic job id,
 * only while the queue holds fewer than `queuedBound` waiting or delayed jobs. Retries keep their
 * short delay in Redis and are not its business. A job queued twice is sent once (the worker checks
 * the record); a job Redis loses after the claim commits is the reconciler's, once overdue past its grace.
 */
export function createDeferralScheduler(options: DeferralSchedulerOptions): DeferralScheduler {
  const { db, deliveryQueue, logger } = options;
  const bound = options.queuedBound ?? QUEUED_BOUND;
  const task = createPeriodicTask({ name: 'deferral scheduler', logger, intervalMs: options.intervalMs ?? SCHEDULER_INTERVAL_MS, run: runOnce });

  async function runOnce(): Promise<number> {
    let queued = 0;
    while (!task.stopped()) {
      const counts = await deliveryQueue.getJobCounts('waiting', 'delayed', 'prioritized');
      const held = (counts.waiting ?? 0) + (counts.delayed ?? 0) + (counts.prioritized ?? 0);
      const room = Math.min(SCHEDULER_BATCH, bound - held);
      if (room <= 0) return queued;
      // Claimed and queued in one transaction: a dispatcher that dies between the two leaves the
      // rows marked (its claim rolls back), for the next pass of any dispatcher rather than the
      // reconciler's grace. A job it had already queued is queued again under the same id, and sent once.
      const pass = await db.transaction().execute(async (trx) => queueClaimedDeliveries({ db: trx, deliveryQueue }, await claimDeferred(trx, room)));
      queued += pass.queued;
      reportOrphaned(logger, pass, options.failed);
      if (pass.seen < room) return queued;
    }
    return queued;
  }

  return { start: task.start, runOnce, stop: task.stop };
}
