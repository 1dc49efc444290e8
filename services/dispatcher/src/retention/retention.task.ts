import { createPartitionUpkeep, partitionsEndedBefore, retireDeliveryDay, type Db, type DeliveryDayTable, type PartitionUpkeep } from '@svc/platform';
import type { Logger } from '@svc/observability';

/** The tables the dispatcher's retention removes from: the bounded label of its counter. */
export type RetainedTable = DeliveryDayTable;

export type RemovedRows = Record<RetainedTable, number>;

export type Retention = PartitionUpkeep<RemovedRows>;

export interface RetentionOptions {
  db: Db;
  logger: Logger;
  /** RETENTION_DAYS: days of deliveries, their attempts and events that ended longer ago than this go. */
  retentionDays: number;
  /** Counts the rows removed, by table. */
  removed?: (table: RetainedTable, n: number) => void;
  /** Before the first pass. */
  firstDelayMs?: number;
  intervalMs?: number;
  /** The clock, for tests that look at a later day. */
  now?: () => Date;
}

/** Before the first pass, so a starting dispatcher serves its backlog first. */
const FIRST_DELAY_MS = 60_000;
const DAY_MS = 86_400_000;

/**
 * The dispatcher's partition upkeep and retention (RETENTION_DAYS), every hour: makes the
 * partitions ahead of the tables it writes, then drops, oldest first, each UTC day of `entregas`,
 * `entrega_intentos` and `outbox` that ended more than RETENTION_DAYS ago, whole
 * (docs/decisions/0009-tables-partitioned-by-day.md). A day that still holds owed work (a pending
 * delivery, an event not fanned out) waits for a later pass; the others go. Any number of dispatchers may run it at once: a day's drop holds
 * its partitions, and a second one finds them gone.
 */
export function createRetention(options: RetentionOptions): Retention {
  const { db, logger, retentionDays } = options;
  const removed = options.removed ?? (() => undefined);
  const now = options.now ?? (() => new Date());
  return createPartitionUpkeep({
    name: 'retention',
    db,
    logger,
    ensure: ['outbox', 'entregas', 'entrega_intentos'],
    firstDelayMs: options.firstDelayMs ?? FIRST_DELAY_MS,
    intervalMs: options.intervalMs,
    retire: async () => {
      const total: RemovedRows = { entregas: 0, entrega_intentos: 0, outbox: 0 };
      const started = Date.now();
      const cutoff = new Date(now().getTime() - retentionDays * DAY_MS);
      const days = new Map<number, Date>();
      for (const table of ['outbox', 'entregas', 'entrega_intentos'] as const) {
        for (const p of await partitionsEndedBefore(db, table, cutoff)) days.set(p.day.getTime(), p.day);
      }
      const dropped: string[] = [];
      for (const day of [...days.values()].sort((a, b) => a.getTime() - b.getTime())) {
        const result = await retireDeliveryDay(db, day);
        const label = day.toISOString().slice(0, 10);
        if (!result.dropped) {
          logger.warn({ day: label, reason: result.reason }, 'retention: a day past RETENTION_DAYS is kept for now (owed work, or its partitions were busy)');
          continue;
        }
        dropped.push(label);
        for (const table of Object.keys(total) as RetainedTable[]) {
          total[table] += result.rows[table];
          if (result.rows[table] > 0) removed(table, result.rows[table]);
        }
      }
      if (dropped.length > 0) {
        logger.info({ ...total, days: dropped, retentionDays, ms: Date.now() - started }, 'retention: days past RETENTION_DAYS dropped');
      }
      return total;
    },
  });
}
