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
  /** Between two passes. Default 1 hour: a day's entries are a small fraction of what is kept. */
  intervalMs?: number;
  /** Before the first pass. Default 90 s, after the idempotency keys' first pass. */
  firstDelayMs?: number;
  /** Entries per statement. Default 5000. */
  batchSize?: number;
  /** Pause between two statements. Default 50 ms. */
  pauseMs?: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Bounds `actividad` (RETENTION_DAYS), the gateway's own table, with the same small batched deletes as
 * the other retentions; the only delete its append-only trigger lets through. Any number of gateways
 * may run it: two passes at once delete disjoint or already-gone rows.
 */
export function createActivityRetention(options: ActivityRetentionOptions): ActivityRetention {
  const { db, logger, retentionDays } = options;
  const batchSize = options.batchSize ?? 5000;
  const pauseMs = options.pauseMs ?? 50;
  const task = createPeriodicTask({ name: 'activity retention', logger, intervalMs: options.intervalMs ?? 3_600_000, firstDelayMs: options.firstDelayMs ?? 90_000, run: runOnce });

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
