import type { Queue } from 'bullmq';
import type { Logger } from '@svc/observability';
import { bulkJobs, JOBS, type DeliveryJob } from '@svc/contracts';

export interface ResendRelay {
  /**
   * Queues the first attempt of each committed resend (its job as the delivery worker takes it),
   * `batchSize` at a time. Never rejects: what fails to be queued stays pending in Postgres, due now,
   * and the dispatcher's reconciler queues it once it is overdue.
   */
  enqueue(jobs: readonly DeliveryJob[]): Promise<void>;
  /** Resolves when every enqueue begun so far has ended (shutdown, tests). */
  drain(): Promise<void>;
}

export interface ResendRelayOptions {
  queue: Pick<Queue<DeliveryJob>, 'addBulk'>;
  logger: Logger;
  /** Jobs per addBulk. Default BATCH_SIZE. */
  batchSize?: number;
}

/** Jobs per addBulk: one round trip for many resends, while a recovery of thousands still goes in short calls. */
const BATCH_SIZE = 500;

/**
 * Moves committed resends to the deliveries queue in batches, so that a recovery of thousands of
 * deliveries answers once its rows are written and its jobs follow behind the answer.
 */
export function createResendRelay(options: ResendRelayOptions): ResendRelay {
  const { queue, logger } = options;
  const batchSize = options.batchSize ?? BATCH_SIZE;
  const running = new Set<Promise<void>>();

  async function run(jobs: readonly DeliveryJob[]): Promise<void> {
    for (let i = 0; i < jobs.length; i += batchSize) {
      const batch = jobs.slice(i, i + batchSize);
      try {
        await queue.addBulk(bulkJobs(JOBS.delivery, batch));
      } catch (err) {
        logger.warn({ err: (err as Error).message, resends: batch.length }, 'resends not queued; the reconciler will');
      }
    }
  }

  return {
    enqueue(jobs) {
      const done = run(jobs).finally(() => running.delete(done));
      running.add(done);
      return done;
    },
    async drain() {
      while (running.size > 0) await Promise.all([...running]);
    },
  };
}
