import { createPeriodicTask, REMOVAL_START, removeDeliveredEvents, removeEndedDeliveries, type Db } from '@svc/platform';
import type { Logger } from '@svc/observability';

/** The tables the dispatcher's retention removes from: the bounded label of its counter. */
export type RetainedTable = 'entregas' | 'entrega_intentos' | 'outbox';

export type RemovedRows = Record<RetainedTable, number>;

export interface Retention {
  /** A first pass after `firstDelayMs`, then one every `intervalMs`. */
  start(): void;
  /** One full pass now, batch after batch until nothing past retention is left: the rows removed. */
  runOnce(): Promise<RemovedRows>;
  /** Ends a pass in progress after its current batch; no new one starts. */
  stop(): Promise<void>;
}

export interface RetentionOptions {
  db: Db;
  logger: Logger;
  /** RETENTION_DAYS: ended deliveries, their attempts and events older than this go. */
  retentionDays: number;
  /** Counts the rows removed, by table. */
  removed?: (table: RetainedTable, n: number) => void;
  /** Between two passes. Default INTERVAL_MS. */
  intervalMs?: number;
  /** Before the first pass. Default FIRST_DELAY_MS. */
  firstDelayMs?: number;
  /** Rows per statement. Default BATCH_SIZE. */
  batchSize?: number;
  /** Pause between two statements. Default PAUSE_MS. */
  pauseMs?: number;
}

/** Between two passes: rows come of age slowly, and a pass that finds little costs little. */
const INTERVAL_MS = 10 * 60_000;
/** Before the first pass, so a starting dispatcher serves its backlog first. */
const FIRST_DELAY_MS = 60_000;
/** Rows per statement: each stays short, so its row locks never hold up a delivery for long. */
const BATCH_SIZE = 5000;
/** Between two statements, so deliveries get Postgres between batches. */
const PAUSE_MS = 50;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Bounds the dispatcher's tables (RETENTION_DAYS) with small batched deletes along their
 * `(created_at, id)` indexes, not by dropping partitions (docs/decisions/0005-retention-by-batched-deletes.md).
 * Deliveries go first, then the events no delivery names any longer, so one pass removes both; any
 * number of dispatchers may run it at once, as skip locked splits the rows between them.
 */
export function createRetention(options: RetentionOptions): Retention {
  const { db, logger, retentionDays } = options;
  const intervalMs = options.intervalMs ?? INTERVAL_MS;
  const firstDelayMs = options.firstDelayMs ?? FIRST_DELAY_MS;
  const batchSize = options.batchSize ?? BATCH_SIZE;
  const pauseMs = options.pauseMs ?? PAUSE_MS;
  const removed = options.removed ?? (() => undefined);
  // runOnce is a function declaration (hoisted): the task may name it before its text.
  const task = createPeriodicTask({ name: 'retention', logger, intervalMs, firstDelayMs, run: runOnce });

  async function runOnce(): Promise<RemovedRows> {
    const total: RemovedRows = { entregas: 0, entrega_intentos: 0, outbox: 0 };
    const count = (table: RetainedTable, n: number): void => {
      if (n === 0) return;
      total[table] += n;
      removed(table, n);
    };
    const started = Date.now();
    // Each table in one walk of its (created_at, id) index, batch after batch, up to the cutoff.
    for (let after = REMOVAL_START; ; ) {
      const batch = await removeEndedDeliveries(db, retentionDays, after, batchSize);
      count('entregas', batch.deliveries);
      count('entrega_intentos', batch.attempts);
      if (batch.seen < batchSize || task.stopped()) break;
      after = batch.next;
      await sleep(pauseMs);
    }
    for (let after = REMOVAL_START; !task.stopped(); ) {
      const batch = await removeDeliveredEvents(db, retentionDays, after, batchSize);
      count('outbox', batch.removed);
      if (batch.seen < batchSize) break;
      after = batch.next;
      await sleep(pauseMs);
    }
    if (total.entregas + total.outbox > 0) {
      logger.info({ ...total, retentionDays, ms: Date.now() - started }, 'retention: rows past RETENTION_DAYS removed');
    }
    return total;
  }

  return { start: task.start, runOnce, stop: task.stop };
}
