// The BullMQ side of the job catalog (jobs.ts in @svc/contracts): what makes a queue or fails a job
// through BullMQ lives here, so that the catalog's names, payloads, options and ids do no I/O.
import { Queue, UnrecoverableError, type ConnectionOptions, type Job } from 'bullmq';
import { AppError, type JobContract } from '@svc/contracts';

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
