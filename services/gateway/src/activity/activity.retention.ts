import type { Logger } from '@svc/observability';
import { createBatchedRetention, type BatchedRetention, type BatchedRetentionTuning, type Db } from '@svc/platform';
import { removeOldActivity } from './activity.repository';

export type ActivityRetention = BatchedRetention;

export interface ActivityRetentionOptions extends BatchedRetentionTuning {
  db: Db;
  logger: Logger;
  /** RETENTION_DAYS: entries older than this go (portal.md: kept at least that long). */
  retentionDays: number;
}

/** An hour: a day's entries are a small fraction of what RETENTION_DAYS keeps. */
const INTERVAL_MS = 3_600_000;
/** 90 s after start, after the idempotency keys' first pass, so the two do not start together. */
const FIRST_DELAY_MS = 90_000;
/** Entries per delete: a statement short enough never to hold up an action's insert for long. */
const BATCH_SIZE = 5000;

/**
 * Bounds `actividad` (RETENTION_DAYS), the gateway's own table, with the same small batched deletes as
 * the other retentions; the only delete its append-only trigger lets through.
 */
export function createActivityRetention(options: ActivityRetentionOptions): ActivityRetention {
  const { db, logger, retentionDays } = options;
  return createBatchedRetention({
    name: 'activity retention',
    logger,
    tuning: options,
    defaults: { intervalMs: INTERVAL_MS, firstDelayMs: FIRST_DELAY_MS, batchSize: BATCH_SIZE },
    removeBatch: (limit) => removeOldActivity(db, retentionDays, limit),
    removed: (total) => logger.info({ actividad: total, retentionDays }, 'retention: activity entries past RETENTION_DAYS removed'),
  });
}
