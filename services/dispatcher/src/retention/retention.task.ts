import { createRetentionTask, REMOVAL_START, removeDeliveredEvents, removeEndedDeliveries, type BatchedRetention, type BatchedRetentionTuning, type Db } from '@svc/platform';
import type { Logger } from '@svc/observability';

/** The tables the dispatcher's retention removes from: the bounded label of its counter. */
export type RetainedTable = 'entregas' | 'entrega_intentos' | 'outbox';

export type RemovedRows = Record<RetainedTable, number>;

export type Retention = BatchedRetention<RemovedRows>;

export interface RetentionOptions extends BatchedRetentionTuning {
  db: Db;
  logger: Logger;
  /** RETENTION_DAYS: ended deliveries, their attempts and events older than this go. */
  retentionDays: number;
  /** Counts the rows removed, by table. */
  removed?: (table: RetainedTable, n: number) => void;
}

/** Between two passes: rows come of age slowly, and a pass that finds little costs little. */
const INTERVAL_MS = 10 * 60_000;
/** Before the first pass, so a starting dispatcher serves its backlog first. */
const FIRST_DELAY_MS = 60_000;
/** Rows per statement: each stays short, so its row locks never hold up a delivery for long. */
const BATCH_SIZE = 5000;

/**
 * Bounds the dispatcher's tables (RETENTION_DAYS) with small batched deletes along their
 * `(created_at, id)` indexes, not by dropping partitions (docs/decisions/0005-retention-by-batched-deletes.md).
 * Deliveries go first, then the events no delivery names any longer, so one pass removes both; any
 * number of dispatchers may run it at once, as skip locked splits the rows between them.
 */
export function createRetention(options: RetentionOptions): Retention {
  const { db, logger, retentionDays } = options;
  const removed = options.removed ?? (() => undefined);
  return createRetentionTask({
    name: 'retention',
    logger,
    tuning: options,
    defaults: { intervalMs: INTERVAL_MS, firstDelayMs: FIRST_DELAY_MS, batchSize: BATCH_SIZE },
    pass: async (walk) => {
      const total: RemovedRows = { entregas: 0, entrega_intentos: 0, outbox: 0 };
      const count = (table: RetainedTable, n: number): void => {
        if (n === 0) return;
        total[table] += n;
        removed(table, n);
      };
      const started = Date.now();
      // Each table in one walk of its (created_at, id) index, batch after batch, up to the cutoff.
      await walk(REMOVAL_START, async (after, limit) => {
        const batch = await removeEndedDeliveries(db, retentionDays, after, limit);
        count('entregas', batch.deliveries);
        count('entrega_intentos', batch.attempts);
        return batch;
      });
      await walk(REMOVAL_START, async (after, limit) => {
        const batch = await removeDeliveredEvents(db, retentionDays, after, limit);
        count('outbox', batch.removed);
        return batch;
      });
      if (total.entregas + total.outbox > 0) {
        logger.info({ ...total, retentionDays, ms: Date.now() - started }, 'retention: rows past RETENTION_DAYS removed');
      }
      return total;
    },
  });
}
