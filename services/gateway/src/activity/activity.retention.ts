import { createPeriodicTask, type Logger } from '@svc/observability';
import type { Db } from '@svc/schema';
import { removeOldActivity } from './activity.repository';

export interface ActivityRetention {
  /** A first pass after `firstDelayMs`, then one every `intervalMs`. */
  start(): void;
  /** One full pass now, batch after batch: how many entries were removed. */
  runOnce(): Promise<number>;
  /** Ends a pass in progress after its current batch; no new one starts. */
  stop(): Promise<void>;
}

export interface ActivityRetentionOptions {
  db: Db;
  logger: Logger;
  /** RETENTION_DAYS: entries older than this go (portal.md: kept at least that long). */
  retentionDays: number;
  /** Between two passes. Default INTERVAL_MS. */
  intervalMs?: number;
  /** Before the first pass. Default FIRST_DELAY_MS. */
  firstDelayMs?: number;
  /** Entries per statement. Default BATCH_SIZE. */
  batchSize?: number;
  /** Pause between two statements. Default PAUSE_MS. */
  pauseMs?: number;
}

/** An hour: a day's entries are a small fraction of what RETENTION_DAYS keeps. */
const INTERVAL_MS = 3_600_000;
/** 90 s after start, after the idempotency keys' first pass, so the two do not start together. */
const FIRST_DELAY_MS = 90_000;
/** Entries per delete: a statement short enough never to hold up an action's insert for long. */
const BATCH_SIZE = 5000;
/** Between two deletes, so a large backlog leaves Postgres room for the requests. */
const PAUSE_MS = 50;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Bounds `actividad` (RETENTION_DAYS), the gateway's own table, with the same small batched deletes as
 * the other retentions; the only delete its append-only trigger lets through. Any number of gateways
 * may run it: two passes at once delete disjoint or already-gone rows.
 */
export function createActivityRetention(options: ActivityRetentionOptions): ActivityRetention {
  const { db, logger, retentionDays } = options;
  const intervalMs = options.intervalMs ?? INTERVAL_MS;
  const firstDelayMs = options.firstDelayMs ?? FIRST_DELAY_MS;
  const batchSize = options.batchSize ?? BATCH_SIZE;
  const pauseMs = options.pauseMs ?? PAUSE_MS;
  // runOnce is a function declaration (hoisted): the task may name it before its text.
  const task = createPeriodicTask({ name: 'activity retention', logger, intervalMs, firstDelayMs, run: runOnce });

  async function runOnce(): Promise<number> {
    let total = 0;
    while (!task.stopped()) {
      const gone = await removeOldActivity(db, retentionDays, batchSize);
      total += gone;
      if (gone < batchSize) break;
      await sleep(pauseMs);
    }
    if (total > 0) logger.info({ actividad: total, retentionDays }, 'retention: activity entries past RETENTION_DAYS removed');
    return total;
  }

  return { start: task.start, runOnce, stop: task.stop };
}
