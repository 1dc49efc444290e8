import type { Logger } from '@svc/observability';
import { createPartitionUpkeep, type Db, type PartitionUpkeep } from '@svc/platform';
import { KEY_LIFETIME_HOURS, removeExpiredKeys } from './idempotency.repository';

export type IdempotencyRetention = PartitionUpkeep<number>;

export interface IdempotencyRetentionOptions {
  db: Db;
  logger: Logger;
  /** Before the first pass. */
  firstDelayMs?: number;
  intervalMs?: number;
  /** The clock, for tests that look at a later day. */
  now?: () => Date;
}

/** A minute after start, so a starting gateway serves before it cleans. */
const FIRST_DELAY_MS = 60_000;

/**
 * The partition upkeep of idempotency keys, every hour: makes their partitions ahead, and drops
 * each day whose keys have all expired (KEY_LIFETIME_HOURS, 24, after the day ended): their
 * answers hold recipients' names, phones and addresses, which nothing needs after the key stops
 * answering. An expired key already answers nothing before its day goes (idempotency.repository.ts).
 */
export function createIdempotencyRetention(options: IdempotencyRetentionOptions): IdempotencyRetention {
  const { db, logger } = options;
  const now = options.now ?? (() => new Date());
  return createPartitionUpkeep({
    name: 'idempotency retention',
    db,
    logger,
    ensure: ['idempotencia'],
    firstDelayMs: options.firstDelayMs ?? FIRST_DELAY_MS,
    intervalMs: options.intervalMs,
    retire: async () => {
      const total = await removeExpiredKeys(db, now());
      if (total > 0) logger.info({ idempotencia: total, hours: KEY_LIFETIME_HOURS }, 'retention: days of expired idempotency keys and their answers dropped');
      return total;
    },
  });
}
