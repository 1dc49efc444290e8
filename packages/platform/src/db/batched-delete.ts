import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '@svc/observability';
import { createPeriodicTask } from '../periodic-task';

/**
 * The one loop of every retention (the dispatcher's deliveries and events, the gateway's activity
 * and idempotency keys): small batched deletes, each a short statement, with a pause between two,
 * in a periodic pass (docs/decisions/0005-retention-by-batched-deletes.md). Any number of processes
 * may run the same retention at once: their batches skip the rows another holds.
 */

/** What one batch did. */
export interface DeletedBatch<C> {
  /** Rows it looked at, removed or left: fewer than the limit once the walk has reached its end. */
  seen: number;
  /** Where the next batch starts. */
  next: C;
}

/** Deletes at most `limit` rows, from `after` on, and says what it did. */
export type DeleteBatch<C> = (after: C, limit: number) => Promise<DeletedBatch<C>>;

/**
 * A walk of one table in a pass: `deleteBatch` from `from`, batch after batch, each from where the
 * last left off, until one comes back short or the task stops.
 */
export type DeleteWalk = <C>(from: C, deleteBatch: DeleteBatch<C>) => Promise<void>;

export interface BatchedRetention<R = number> {
  /** A first pass after `firstDelayMs`, then one every `intervalMs`. */
  start(): void;
  /** One full pass now, batch after batch until nothing past retention is left: what it removed. */
  runOnce(): Promise<R>;
  /** Ends a pass in progress after its current batch; no new one starts. */
  stop(): Promise<void>;
}

/** The settings a retention's owner may override (tests do); each retention has its own defaults. */
export interface BatchedRetentionTuning {
  /** Between two passes. */
  intervalMs?: number;
  /** Before the first pass. */
  firstDelayMs?: number;
  /** Rows per statement. */
  batchSize?: number;
  /** Pause between two statements. Default RETENTION_PAUSE_MS. */
  pauseMs?: number;
}

/** Between two deletes, so a large backlog leaves Postgres room for the requests and deliveries. */
export const RETENTION_PAUSE_MS = 50;


/**
 * A retention whose pass is `pass(walk)`: it walks each of its tables with `walk` and returns what
 * it removed (its counting, metrics and log line are its own).
 */
export function createRetentionTask<R>(options: {
  name: string;
  logger: Logger;
  tuning: BatchedRetentionTuning;
  defaults: { intervalMs: number; firstDelayMs: number; batchSize: number };
  pass: (walk: DeleteWalk) => Promise<R>;
}): BatchedRetention<R> {
  const { name, logger, tuning, defaults, pass } = options;
  const batchSize = tuning.batchSize ?? defaults.batchSize;
  const pauseMs = tuning.pauseMs ?? RETENTION_PAUSE_MS;
  // runOnce is a function declaration (hoisted): the task may name it before its text.
  const task = createPeriodicTask({
    name,
    logger,
    intervalMs: tuning.intervalMs ?? defaults.intervalMs,
    firstDelayMs: tuning.firstDelayMs ?? defaults.firstDelayMs,
    run: runOnce,
  });

  async function walk<C>(from: C, deleteBatch: DeleteBatch<C>): Promise<void> {
    for (let after = from; !task.stopped(); ) {
      const batch = await deleteBatch(after, batchSize);
      if (batch.seen < batchSize || task.stopped()) return;
      after = batch.next;
      await sleep(pauseMs);
    }
  }

  function runOnce(): Promise<R> {
    return pass(walk);
  }

  return { start: task.start, runOnce, stop: task.stop };
}

/**
 * A retention of one table removed oldest first with no cursor to keep: `removeBatch(limit)`
 * deletes at most `limit` rows and says how many, and `removed(total)` hears of a pass that
 * removed any.
 */
export function createBatchedRetention(options: {
  name: string;
  logger: Logger;
  tuning: BatchedRetentionTuning;
  defaults: { intervalMs: number; firstDelayMs: number; batchSize: number };
  removeBatch: (limit: number) => Promise<number>;
  removed: (total: number) => void;
}): BatchedRetention {
  const { removeBatch, removed } = options;
  return createRetentionTask({
    ...options,
    pass: async (walk) => {
      let total = 0;
      await walk(null, async (_after, limit) => {
        const gone = await removeBatch(limit);
        total += gone;
        return { seen: gone, next: null };
      });
      if (total > 0) removed(total);
      return total;
    },
  });
}
