import type { Logger } from '@svc/observability';
import { createPartitionUpkeep, type Db, type PartitionUpkeep } from '@svc/platform';
import { removeOldActivity } from './activity.repository';

export type ActivityRetention = PartitionUpkeep<number>;

export interface ActivityRetentionOptions {
  db: Db;
  logger: Logger;
  /** RETENTION_DAYS: days of entries that ended longer ago than this go (portal.md: kept at least that long). */
  retentionDays: number;
  /** Before the first pass. */
  firstDelayMs?: number;
  intervalMs?: number;
  /** The clock, for tests that look at a later day. */
  now?: () => Date;
}

/** 90 s after start, after the idempotency keys' first pass, so the two do not start together. */
const FIRST_DELAY_MS = 90_000;

/**
 * The gateway's partition upkeep of `actividad` (RETENTION_DAYS), its own table, every hour: makes
 * its partitions ahead, and those of the delivery tables the gateway writes too (events, PINGs,
 * resends), so they are there when no dispatcher runs; then drops the days of entries older than
 * RETENTION_DAYS, whole (no entry is ever deleted: the append-only trigger refuses every delete).
 */
export function createActivityRetention(options: ActivityRetentionOptions): ActivityRetention {
  const { db, logger, retentionDays } = options;
  const now = options.now ?? (() => new Date());
  return createPartitionUpkeep({
    name: 'activity retention',
    db,
    logger,
    ensure: ['actividad', 'outbox', 'entregas', 'entrega_intentos'],
    firstDelayMs: options.firstDelayMs ?? FIRST_DELAY_MS,
    intervalMs: options.intervalMs,
    retire: async () => {
      const total = await removeOldActivity(db, retentionDays, now());
      if (total > 0) logger.info({ actividad: total, retentionDays }, 'retention: days of activity entries past RETENTION_DAYS dropped');
      return total;
    },
  });
}
