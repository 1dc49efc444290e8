import { createPeriodicTask, type Logger } from '@svc/observability';
import type { Db } from '@svc/schema';
import { KEY_LIFETIME_HOURS, removeExpiredKeys } from './idempotency.repository';

export interface IdempotencyRetention {
  /** A first pass after `firstDelayMs`, then one every `intervalMs`. */
  start(): void;
  /** One full pass now, batch after batch: how many keys were removed. */
  runOnce(): Promise<number>;
  /** Ends a pass in progress after its current batch; no new one starts. */
  stop(): Promise<void>;
}

export interface IdempotencyRetentionOptions {
  db: Db;
  logger: Logger;
  /** Between two passes. Default INTERVAL_MS. */
  intervalMs?: number;
  /** Before the first pass. Default FIRST_DELAY_MS. */
  firstDelayMs?: number;
  /** Keys per statement. Default BATCH_SIZE. */
  batchSize?: number;
  /** Pause between two statements. Default PAUSE_MS. */
  pauseMs?: number;
}

/** A pass every 10 minutes: an answer outlives its key (24 hours) by at most that, at little cost. */
const INTERVAL_MS = 600_000;
/** A minute after start, so a starting gateway serves before it cleans. */
const FIRST_DELAY_MS = 60_000;
/** Keys per delete: a statement short enough never to hold up a creation for long. */
const BATCH_SIZE = 5000;
/** Between two deletes, so a large backlog leaves Postgres room for the requests. */
const PAUSE_MS = 50;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Deletes idempotency keys once they expire (KEY_LIFETIME_HOURS, 24): their answers hold recipients'
 * names, phones and addresses, which nothing needs after the key stops answering. The same small
 * batched deletes as the dispatcher's retention (services/dispatcher/src/retention), each a short
 * statement that skips keys a request holds, so a creation never waits on it. Any number of gateways
 * may run it.
 */
export function createIdempotencyRetention(options: IdempotencyRetentionOptions): IdempotencyRetention {
  const { db, logger } = options;
  const intervalMs = options.intervalMs ?? INTERVAL_MS;
  const firstDelayMs = options.firstDelayMs ?? FIRST_DELAY_MS;
  const batchSize = options.batchSize ?? BATCH_SIZE;
  const pauseMs = options.pauseMs ?? PAUSE_MS;
  // runOnce is a function declaration (hoisted): the task may name it before its text.
  const task = createPeriodicTask({ name: 'idempotency retention', logger, intervalMs, firstDelayMs, run: runOnce });

  async function runOnce(): Promise<number> {
    let total = 0;
    while (!task.stopped()) {
      const gone = await removeExpiredKeys(db, batchSize);
      total += gone;
      if (gone < batchSize) break;
      await sleep(pauseMs);
    }
    if (total > 0) logger.info({ idempotencia: total, hours: KEY_LIFETIME_HOURS }, 'retention: expired idempotency keys and their answers removed');
    return total;
  }

  return { start: task.start, runOnce, stop: task.stop };
}
