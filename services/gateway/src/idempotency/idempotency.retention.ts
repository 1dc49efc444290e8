import { createPeriodicTask, type Logger } from '@svc/observability';
import type { Db } from '@svc/schema';
import { removeExpiredKeys } from './idempotency.repository';

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
  /** RETENTION_DAYS: keys claimed longer ago than this go. */
  retentionDays: number;
  /** Between two passes. Default INTERVAL_MS. */
  intervalMs?: number;
  /** Before the first pass. Default FIRST_DELAY_MS. */
  firstDelayMs?: number;
  /** Keys per statement. Default BATCH_SIZE. */
  batchSize?: number;
  /** Pause between two statements. Default PAUSE_MS. */
  pauseMs?: number;
}

/** Keys live for days: a pass every 10 minutes keeps the table near its retention at little cost. */
const INTERVAL_MS = 600_000;
/** A minute after start, so a starting gateway serves before it cleans. */
const FIRST_DELAY_MS = 60_000;
/** Keys per delete: a statement short enough never to hold up a creation for long. */
const BATCH_SIZE = 5000;
/** Between two deletes, so a large backlog leaves Postgres room for the requests. */
const PAUSE_MS = 50;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Bounds `idempotencia` (RETENTION_DAYS), the gateway's own table: the same small batched deletes
 * as the dispatcher's retention (services/dispatcher/src/retention), each a short statement that
 * skips keys a request holds, so a creation never waits on it. Any number of gateways may run it.
 */
export function createIdempotencyRetention(options: IdempotencyRetentionOptions): IdempotencyRetention {
  const { db, logger, retentionDays } = options;
  const intervalMs = options.intervalMs ?? INTERVAL_MS;
  const firstDelayMs = options.firstDelayMs ?? FIRST_DELAY_MS;
  const batchSize = options.batchSize ?? BATCH_SIZE;
  const pauseMs = options.pauseMs ?? PAUSE_MS;
  // runOnce is a function declaration (hoisted): the task may name it before its text.
  const task = createPeriodicTask({ name: 'idempotency retention', logger, intervalMs, firstDelayMs, run: runOnce });

  async function runOnce(): Promise<number> {
    let total = 0;
    while (!task.stopped()) {
      const gone = await removeExpiredKeys(db, retentionDays, batchSize);
      total += gone;
      if (gone < batchSize) break;
      await sleep(pauseMs);
    }
    if (total > 0) logger.info({ idempotencia: total, retentionDays }, 'retention: idempotency keys past RETENTION_DAYS removed');
    return total;
  }

  return { start: task.start, runOnce, stop: task.stop };
}
