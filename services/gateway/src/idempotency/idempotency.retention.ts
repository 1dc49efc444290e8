import type { Logger } from '@svc/observability';
import { createBatchedRetention, type BatchedRetention, type BatchedRetentionTuning, type Db } from '@svc/platform';
import { KEY_LIFETIME_HOURS, removeExpiredKeys } from './idempotency.repository';

export type IdempotencyRetention = BatchedRetention;

export interface IdempotencyRetentionOptions extends BatchedRetentionTuning {
  db: Db;
  logger: Logger;
}

/** A pass every 10 minutes: an answer outlives its key (24 hours) by at most that, at little cost. */
const INTERVAL_MS = 600_000;
/** A minute after start, so a starting gateway serves before it cleans. */
const FIRST_DELAY_MS = 60_000;
/** Keys per delete: a statement short enough never to hold up a creation for long. */
const BATCH_SIZE = 5000;

/**
 * Deletes idempotency keys once they expire (KEY_LIFETIME_HOURS, 24): their answers hold recipients'
 * names, phones and addresses, which nothing needs after the key stops answering. Through the
 * batched-delete loop every retention runs (@svc/platform, db/batched-delete.ts), each batch a short
 * statement that skips keys a request holds, so a creation never waits on it.
 */
export function createIdempotencyRetention(options: IdempotencyRetentionOptions): IdempotencyRetention {
  const { db, logger } = options;
  return createBatchedRetention({
    name: 'idempotency retention',
    logger,
    tuning: options,
    defaults: { intervalMs: INTERVAL_MS, firstDelayMs: FIRST_DELAY_MS, batchSize: BATCH_SIZE },
    removeBatch: (limit) => removeExpiredKeys(db, limit),
    removed: (total) => logger.info({ idempotencia: total, hours: KEY_LIFETIME_HOURS }, 'retention: expired idempotency keys and their answers removed'),
  });
}
