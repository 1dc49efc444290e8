// The BullMQ side of the job catalog (jobs.ts in @svc/contracts): what makes a queue or fails a job
// through BullMQ lives here, so that the catalog's names, payloads, options and ids do no I/O.
import { Queue, UnrecoverableError, type ConnectionOptions, type Job } from 'bullmq';
import { AppError, type JobContract } from '@svc/contracts';
import type { RedisClient } from './redis';

/** The queue of a contract, with its options as every job's defaults. */
export function queueFor<P>(
  contract: JobContract<P>,
  settings: { connection: ConnectionOptions; prefix: string },
): Queue<P> {
  return new Queue<P>(contract.queue, { ...settings, defaultJobOptions: contract.options });
}

/**
 * The payload of a job a worker has taken, checked against its contract. A malformed one (an old
 * shape, a hand-made job) fails at once and for good: BullMQ does not retry an UnrecoverableError,
 * and the worker goes on with the next job.
 */
export function validPayload<P>(contract: JobContract<P>, job: Pick<Job, 'id' | 'data'>): P {
  try {
    return contract.validate(job.data);
  } catch (err) {
    if (!(err instanceof AppError)) throw err;
    throw new UnrecoverableError(`malformed ${contract.name} job ${job.id ?? '(no id)'}: ${err.message}`);
  }
}

/**
 * BullMQ keeps a delayed job in its queue's `delayed` sorted set scored by its due time in ms times
 * this, plus a counter below it (its getDelayedScore.lua), so that jobs due in one millisecond keep
 * their order.
 */
const DELAYED_SCORE_PER_MS = 0x1000;

/**
 * Delayed jobs whose due time has passed but that no worker has moved to waiting yet: work owed now,
 * as much as the waiting jobs are (queue depth for autoscaling). Counted with the bound BullMQ's
 * promoteDelayedJobs.lua takes for "due", one ZCOUNT.
 */
export function dueDelayedJobs(redis: RedisClient, queue: Pick<Queue, 'toKey'>, now = Date.now()): Promise<number> {
  return redis.zcount(queue.toKey('delayed'), 0, (now + 1) * DELAYED_SCORE_PER_MS - 1);
}
