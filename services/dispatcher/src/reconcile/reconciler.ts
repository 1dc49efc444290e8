import { abandonDelivery, claimOverdue, createPeriodicTask, type Db, type OverdueDelivery, type ShardedQueue } from '@svc/platform';
import type { Logger } from '@svc/observability';
import { bulkJobs, deliveryJobOf, JOBS, type DeliveryJob, type EventName, type JobContract, type ShipmentEventJob } from '@svc/contracts';
import { findEvents, lockUnfanned } from '../outbox/outbox.repository';
import { findWebhookModes } from '../webhooks/webhook.repository';

export interface Reconciler {
  /** Looks every `intervalMs` from now on. */
  start(): void;
  /** One full pass now: how many events and deliveries it queued again. */
  runOnce(): Promise<{ events: number; deliveries: number }>;
  /** Waits for a pass in progress; no new one starts. */
  stop(): Promise<void>;
}

export interface ReconcilerOptions {
  db: Db;
  /** Every shard's: a company's lost work is queued again on its own shard. */
  eventsQueue: Requeueing<ShipmentEventJob>;
  deliveryQueue: Requeueing<DeliveryJob>;
  logger: Logger;
  /** Counts what was queued again, by kind (event, delivery). */
  requeued: (kind: 'event' | 'delivery', n: number) => void;
  /** Counts a delivery ended as failed because its event row is gone (svc_webhook_deliveries_total). */
  failed?: (event: EventName) => void;
  /** RECONCILE_INTERVAL_MS: how often it looks. */
  intervalMs: number;
  /** RECONCILE_GRACE_MS: how late an event's fan-out or a delivery's attempt must be to count as lost. */
  graceMs: number;
  /** Rows per statement. Default BATCH_SIZE. */
  batchSize?: number;
}

/** Rows per statement: a pass claims and queues them together, and a short statement holds its locks briefly. */
const BATCH_SIZE = 500;

type Entry<P> = ReturnType<typeof bulkJobs<P>>[number];

/** One claim of rows and the jobs queued for them. */
export interface Pass {
  /** Rows found due. */
  seen: number;
  /** Jobs added again. */
  queued: number;
  /** The first few deliveries queued, for a log line. */
  deliveryIds?: string[];
  /**
   * Deliveries ended as failed because their event's row (which carries the payload) is gone: with
   * nothing to send, claimed and skipped they would stay pending for ever, claimed again each pass.
   */
  orphaned?: Array<{ deliveryId: string; event: EventName }>;
}

/** What queuing lost work again needs of a sharded queue: its job's shard, to ask and remove there. */
export type Requeueing<P> = Pick<ShardedQueue<P>, 'addBulk' | 'queueOf'>;

export interface DeliveryRequeueDeps {
  db: Db;
  deliveryQueue: Requeueing<DeliveryJob>;
}

/**
 * Queues the job of each claimed delivery's next attempt under its deterministic id, unless Redis
 * still holds it as work. Shared by the reconciler (overdue past its grace: lost work) and the
 * deferral scheduler (deferred work, now due, that waited in Postgres).
 */
export async function queueClaimedDeliveries(deps: DeliveryRequeueDeps, overdue: readonly OverdueDelivery[]): Promise<Pass> {
  const { db, deliveryQueue } = deps;
  if (overdue.length === 0) return { seen: 0, queued: 0 };
  const pings = overdue.filter((o) => o.event === 'PING');
  const [events, pinged] = await Promise.all([
    findEvents(db, [...new Set(overdue.filter((o) => o.event !== 'PING').map((o) => o.eventId))]),
    findWebhookModes(db, [...new Set(pings.map((o) => o.webhookId))]),
  ]);
  const jobs: DeliveryJob[] = [];
  const orphaned: Array<{ deliveryId: string; event: EventName }> = [];
  for (const o of overdue) {
    const common = { deliveryId: o.deliveryId, attempt: o.attempt, webhookId: o.webhookId, eventId: o.eventId };
    // The row's own key: a resend's is its creation, not its event's.
    const partitionAt = o.partitionAt.toISOString();
    if (o.event === 'PING') {
      // The resend of a PING: no event row; its data is empty and its mode the webhook's.
      const webhook = pinged.get(o.webhookId);
      if (!webhook) continue;
      jobs.push({ ...common, empresaId: webhook.empresaId, evento: 'PING', data: {}, committedAt: (o.resentAt ?? new Date()).toISOString(), requestId: null, mode: webhook.mode, partitionAt });
      continue;
    }
    const event = events.get(o.eventId);
    if (!event) {
      // Retention keeps an event while any delivery names it, so only a hand (or a tool writing
      // straight to the queue) removes it: there is nothing left to sign and send.
      if (await abandonDelivery(db, o.deliveryId, partitionAt)) orphaned.push({ deliveryId: o.deliveryId, event: o.event });
      continue;
    }
    // A resend's work was committed when it was made.
    jobs.push({ ...deliveryJobOf(event, o), committedAt: o.resentAt?.toISOString() ?? event.committedAt, partitionAt });
  }
  const n = await requeue(deliveryQueue, JOBS.delivery, jobs);
  return { seen: overdue.length, queued: n, deliveryIds: jobs.slice(0, 20).map((j) => j.deliveryId), ...(orphaned.length > 0 ? { orphaned } : {}) };
}

/** Deliveries ended because their event's row is gone: one error line, and each counted as failed. */
export function reportOrphaned(logger: Logger, pass: Pass, failed?: (event: EventName) => void): void {
  if (!pass.orphaned) return;
  for (const o of pass.orphaned) failed?.(o.event);
  logger.error({ deliveries: pass.orphaned.length, deliveryIds: pass.orphaned.slice(0, 20).map((o) => o.deliveryId) }, 'deliveries failed: their event row is gone, nothing to send');
}

/**
 * Queues again the entries whose job Redis no longer holds as work: a job that is missing (Redis
 * lost it) is added; one that has finished (failed past its retries, or completed while the record
 * says the work is still owed) is removed first, since BullMQ ignores an add under an id it still
 * holds. A job still waiting, delayed or running is left alone. Returns how many were added.
 */
async function requeue<P>(queue: Requeueing<P>, contract: JobContract<P>, payloads: readonly P[]): Promise<number> {
  const entries = bulkJobs(contract, payloads);
  const states = await Promise.all(entries.map((e) => queue.queueOf(e.data).getJobState(e.opts.jobId)));
  const lost: Entry<P>[] = [];
  for (const [i, entry] of entries.entries()) {
    const state = states[i];
    if (state === 'completed' || state === 'failed') await queue.queueOf(entry.data).remove(entry.opts.jobId);
    if (state === 'completed' || state === 'failed' || state === 'unknown') lost.push(entry);
  }
  if (lost.length > 0) await queue.addBulk(lost as Parameters<typeof queue.addBulk>[0]);
  return lost.length;
}

/**
 * Rebuilds Redis's work list from Postgres, the record: events committed but not fanned out, and
 * pending deliveries whose next attempt is overdue, each more than `graceMs` late. Any number of
 * dispatchers run it at once: the events are locked (skip locked) while they are queued again, and
 * overdue deliveries are claimed by moving their due time ahead. It never queues a delivery that
 * has ended (only `pendiente` rows qualify), and a job queued twice is sent once: the delivery
 * worker checks the record before it sends.
 */
export function createReconciler(options: ReconcilerOptions): Reconciler {
  const { db, eventsQueue, deliveryQueue, logger, requeued, failed, intervalMs, graceMs } = options;
  const batchSize = options.batchSize ?? BATCH_SIZE;
  // runOnce is a function declaration (hoisted): the task may name it before its text.
  const task = createPeriodicTask({ name: 'reconciler', logger, intervalMs, run: runOnce });

  async function eventsPass(): Promise<Pass> {
    return db.transaction().execute(async (trx) => {
      const events = await lockUnfanned(trx, graceMs, batchSize);
      if (events.length === 0) return { seen: 0, queued: 0 };
      const n = await requeue(eventsQueue, JOBS.shipmentEvent, events);
      if (n > 0) {
        requeued('event', n);
        logger.warn({ events: n, eventIds: events.slice(0, 20).map((e) => e.eventId) }, 'reconciler: events not fanned out queued again');
      }
      return { seen: events.length, queued: n };
    });
  }

  async function deliveriesPass(): Promise<Pass> {
    const pass = await queueClaimedDeliveries({ db, deliveryQueue }, await claimOverdue(db, graceMs, batchSize));
    if (pass.queued > 0) {
      requeued('delivery', pass.queued);
      logger.warn({ deliveries: pass.queued, deliveryIds: pass.deliveryIds }, 'reconciler: overdue deliveries queued again');
    }
    reportOrphaned(logger, pass, failed);
    return pass;
  }

  async function runOnce(): Promise<{ events: number; deliveries: number }> {
    const all = async (pass: () => Promise<Pass>): Promise<number> => {
      let queued = 0;
      for (;;) {
        const p = await pass();
        queued += p.queued;
        if (p.seen < batchSize || task.stopped()) return queued;
      }
    };
    return { events: await all(eventsPass), deliveries: await all(deliveriesPass) };
  }

  return { start: task.start, runOnce, stop: task.stop };
}
