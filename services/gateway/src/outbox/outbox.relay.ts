import type { Queue } from 'bullmq';
import type { Logger } from '@svc/observability';
import { bulkJobs, JOBS, type ShipmentEventJob } from '@svc/contracts';
import { markSent, type Db, type PendingJob } from '@svc/platform';
import type { GatewayMetrics } from '../observability/gateway-metrics';
import { lockUnsent } from './outbox.repository';

export interface OutboxRelay {
  /** Starts the periodic sweep of committed-but-unsent rows. */
  start(): void;
  /** Hands events to the relay right after their transaction committed. */
  notify(jobs: PendingJob[]): void;
  /** Resolves when everything notified so far has been tried once (tests, shutdown). */
  drain(): Promise<void>;
  /** One sweep pass now; returns how many events it added. */
  sweepNow(): Promise<number>;
  stop(): Promise<void>;
}

export interface OutboxRelayOptions {
  db: Db;
  queue: Pick<Queue<ShipmentEventJob>, 'addBulk'>;
  logger: Logger;
  metrics: Pick<GatewayMetrics, 'outboxRelayed'>;
  /** How often the sweep looks for unsent rows. Default SWEEP_INTERVAL_MS. */
  sweepIntervalMs?: number;
  /** A row younger than this belongs to the fast path, not the sweep. Default SWEEP_MIN_AGE_MS. */
  sweepMinAgeMs?: number;
  /** Largest batch per queue call. Default BATCH_SIZE. */
  batchSize?: number;
}

/** The sweep only repairs (a crash between commit and add, Redis away): every 2 s bounds that delay cheaply. */
const SWEEP_INTERVAL_MS = 2000;
/** Far longer than a commit takes to reach the fast path, so the sweep does not race it for fresh rows. */
const SWEEP_MIN_AGE_MS = 1000;
/** Jobs per addBulk and rows per mark: large enough to pay one round trip for many events, small enough to keep each call short. */
const BATCH_SIZE = 500;

// Job id = event id: a second add of the same event (relay and sweep racing) is a no-op.
const addJobs = (queue: OutboxRelayOptions['queue'], jobs: ShipmentEventJob[]) => queue.addBulk(bulkJobs(JOBS.shipmentEvent, jobs));

/**
 * Moves committed outbox rows to the queue. The fast path batches what commits notify (one
 * addBulk and one UPDATE per batch); the sweep re-adds anything committed but not marked sent
 * (a crash between commit and add, Redis briefly away). An event committed is never lost.
 */
export function createOutboxRelay(options: OutboxRelayOptions): OutboxRelay {
  const { db, queue, logger, metrics } = options;
  const sweepIntervalMs = options.sweepIntervalMs ?? SWEEP_INTERVAL_MS;
  const sweepMinAgeMs = options.sweepMinAgeMs ?? SWEEP_MIN_AGE_MS;
  const batchSize = options.batchSize ?? BATCH_SIZE;

  let buffer: ShipmentEventJob[] = [];
  let flushing: Promise<void> | undefined;
  /** The marks of relayed batches, one statement at a time, each after the one before. */
  let marking: Promise<void> = Promise.resolve();
  let timer: NodeJS.Timeout | undefined;
  let sweeping: Promise<void> | undefined;
  let stopped = false;

  async function flush(): Promise<void> {
    while (buffer.length) {
      const batch = buffer.slice(0, batchSize);
      buffer = buffer.slice(batchSize);
      try {
        await addJobs(queue, batch);
      } catch (err) {
        // Left unsent in Postgres: the sweep will add them.
        logger.warn({ err: (err as Error).message, events: batch.length }, 'outbox relay failed; the sweep will retry');
        continue;
      }
      metrics.outboxRelayed.inc({ path: 'relay' }, batch.length);
      // The mark runs while the next batch is added: the job is queued already, and a row left
      // unmarked is only added again by the sweep, under the same job id, which BullMQ ignores.
      marking = marking
        .then(() => markSent(db, batch))
        .catch((err: unknown) => logger.warn({ err: (err as Error).message, events: batch.length }, 'outbox rows not marked sent; the sweep will add them again'));
    }
  }

  function scheduleFlush(): void {
    if (flushing) return;
    flushing = new Promise<void>((resolve) => setImmediate(resolve))
      .then(flush)
      .finally(() => {
        flushing = undefined;
        if (buffer.length) scheduleFlush();
      });
  }

  async function sweepOnce(): Promise<number> {
    return db.transaction().execute(async (trx) => {
      const jobs = await lockUnsent(trx, sweepMinAgeMs, batchSize);
      if (jobs.length === 0) return 0;
      await addJobs(queue, jobs);
      await markSent(trx, jobs);
      metrics.outboxRelayed.inc({ path: 'sweep' }, jobs.length);
      return jobs.length;
    });
  }

  async function sweep(): Promise<void> {
    try {
      while ((await sweepOnce()) === batchSize && !stopped);
    } catch (err) {
      logger.warn({ err: (err as Error).message }, 'outbox sweep failed; will retry');
    }
  }

  return {
    start() {
      const tick = (): void => {
        timer = setTimeout(() => {
          sweeping = sweep().finally(() => {
            sweeping = undefined;
            if (!stopped) tick();
          });
        }, sweepIntervalMs);
        timer.unref();
      };
      tick();
    },
    notify(jobs) {
      if (jobs.length === 0) return;
      const committedAt = new Date().toISOString();
      for (const j of jobs) buffer.push({ ...j, committedAt });
      scheduleFlush();
    },
    async drain() {
      while (flushing) await flushing;
      await marking;
    },
    sweepNow: sweepOnce,
    async stop() {
      stopped = true;
      clearTimeout(timer);
      while (flushing) await flushing;
      await marking;
      if (sweeping) await sweeping;
    },
  };
}
