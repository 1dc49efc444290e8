import { createPeriodicTask } from '@svc/platform';
import type { Logger } from '@svc/observability';

export interface BatchedRetention {
  /** A first pass after `firstDelayMs`, then one every `intervalMs`. */
  start(): void;
  /** One full pass now, batch after batch: how many rows were removed. */
  runOnce(): Promise<number>;
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
  /** Pause between two statements. */
  pauseMs?: number;
}

/** Between two deletes, so a large backlog leaves Postgres room for the requests. */
export const RETENTION_PAUSE_MS = 50;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A periodic pass of small batched deletes: `removeBatch(limit)` deletes at most `limit` rows and says how
 * many, and the pass goes on until a batch comes back short or the task stops. `removed(total)` hears of a
 * pass that removed anything. Any number of gateways may run one: two passes delete disjoint or gone rows.
 */
export function createBatchedRetention(options: {
  name: string;
  logger: Logger;
  tuning: BatchedRetentionTuning;
  defaults: { intervalMs: number; firstDelayMs: number; batchSize: number };
  removeBatch: (limit: number) => Promise<number>;
  removed: (total: number) => void;
}): BatchedRetention {
  const { name, logger, tuning, defaults, removeBatch, removed } = options;
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

  async function runOnce(): Promise<number> {
    let total = 0;
    while (!task.stopped()) {
      const gone = await removeBatch(batchSize);
      total += gone;
      if (gone < batchSize) break;
      await sleep(pauseMs);
    }
    if (total > 0) removed(total);
    return total;
  }

  return { start: task.start, runOnce, stop: task.stop };
}
