import { createPeriodicTask, type Logger } from '@svc/observability';
import type { Db } from '@svc/schema';
import { removeEndedDeliveries } from '../deliveries/delivery.repository';
import { REMOVAL_START } from '../support/removal-cursor';
import { removeDeliveredEvents } from '../outbox/outbox.repository';

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
  /** Between two passes. Default 10 minutes. */
  intervalMs?: number;
  /** Before the first pass, so a starting dispatcher serves its backlog first. Default 60 s. */
  firstDelayMs?: number;
  /** Rows per statement. Default 5000. */
  batchSize?: number;
  /** Pause between two statements, so deliveries get Postgres between batches. Default 50 ms. */
  pauseMs?: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Bounds the dispatcher's tables (RETENTION_DAYS): small batched deletes on `(created_at, id)` indexes,
 * not daily partitions. Why: partitioning `entregas` and `outbox` would change their primary keys
 * (a partition key must be in every unique index, so the unique (evento_id, webhook_id) index and
 * the `reenvio_de` self-reference would have to go or change) and needs a migration that rewrites
 * both tables and a job creating partitions ahead; a dropped partition would also take pending
 * deliveries and events not fanned out with it, which must stay whatever their age. Batches of a
 * few thousand rows, each its own short statement that skips locked rows, hold row locks briefly
 * and never wait on a delivery; the pause between batches leaves Postgres to the deliveries. Each
 * table is walked once per pass along its (created_at, id) index with a keyset cursor, so the
 * rows a pass leaves (pending, locked) and the dead index entries of its earlier batches are not
 * scanned again batch after batch. The cost is measured in bench/retention (bench/README.md). Dropping partitions would
 * be cheaper at hundreds of millions of rows a day; the design can move to it when that is the load.
 *
 * Deliveries go first, then the events no delivery names any longer, so one pass removes both.
 * Any number of dispatchers may run it at once: skip locked splits the rows between them.
 */
export function createRetention(options: RetentionOptions): Retention {
  const { db, logger, retentionDays } = options;
  const intervalMs = options.intervalMs ?? 600_000;
  const firstDelayMs = options.firstDelayMs ?? 60_000;
  const batchSize = options.batchSize ?? 5000;
  const pauseMs = options.pauseMs ?? 50;
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
