import { sql, type Kysely, type RawBuilder, type SqlBool } from 'kysely';
import type { Logger } from '@svc/observability';
import { createPeriodicTask } from '../periodic-task';

/**
 * The tables that grow with traffic, range-partitioned by day in UTC on their partition key
 * (docs/decisions/0009-tables-partitioned-by-day.md): one partition per day, named
 * `<table>_pYYYYMMDD`, and a DEFAULT partition (`<table>_default`) that takes a row of a day that has
 * none yet, so an insert never fails for want of one. The upkeep makes each day's partition ahead
 * of time, moves into it whatever the DEFAULT partition took for it, and the retentions drop whole
 * days instead of deleting rows.
 */

/** Each partitioned table and the column it is partitioned on. */
export const PARTITION_KEYS = {
  entregas: 'particion_en',
  entrega_intentos: 'particion_en',
  outbox: 'created_at',
  actividad: 'created_at',
  idempotencia: 'created_at',
} as const;

export type PartitionedTable = keyof typeof PARTITION_KEYS;

/**
 * Days made ahead of today: a week, so the upkeep (hourly) can fail for days, or every process be
 * down over a weekend, before a row lands in the DEFAULT partition, which then costs a move.
 */
export const PARTITIONS_AHEAD_DAYS = 7;

/**
 * How long a partition's DDL waits for its locks. Creating or dropping a partition locks the
 * parent, and every statement on the table that comes after waits behind a DDL that waits: half a
 * second bounds that stall (statements on these tables take milliseconds), and the next pass retries.
 */
export const PARTITION_LOCK_TIMEOUT_MS = 500;

/** The advisory lock class of the partition upkeep: one process at a time makes a table's partitions. */
const UPKEEP_LOCK_CLASS = 0x5a1d;

const DAY_MS = 86_400_000;

/** Any Kysely (a migration's is untyped): these statements only use `sql`. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/** The UTC midnight that starts `at`'s day. */
export const dayOf = (at: Date): Date => new Date(Math.floor(at.getTime() / DAY_MS) * DAY_MS);

const addDays = (day: Date, n: number): Date => new Date(day.getTime() + n * DAY_MS);

/**
 * A key read back from Postgres is its value truncated to the millisecond (Postgres keeps
 * microseconds): a range of keys is widened by a second on each side, which still names one day
 * (two within a second of midnight) and never misses the row.
 */
const KEY_MARGIN_MS = 1000;

/** The partition keys a statement's rows lie between, as timestamptz parameters. */
export interface PartitionRange {
  from: string;
  to: string;
}

/**
 * The range of partition keys of rows found by id (jobs carry their rows' keys): the statement adds
 * `<key> between from and to`, so its plan touches only those days' partitions (Postgres prunes the
 * others as the prepared statement starts). Unbounded when any key is unknown (a job queued before
 * jobs carried it): every day is probed, as before.
 */
export function partitionRange(keys: Iterable<string | Date | null | undefined>): PartitionRange {
  let min = Infinity;
  let max = -Infinity;
  for (const key of keys) {
    const at = key === null || key === undefined ? NaN : new Date(key).getTime();
    if (Number.isNaN(at)) return { from: '-infinity', to: 'infinity' };
    if (at < min) min = at;
    if (at > max) max = at;
  }
  if (min === Infinity) return { from: '-infinity', to: 'infinity' };
  return { from: new Date(min - KEY_MARGIN_MS).toISOString(), to: new Date(max + KEY_MARGIN_MS).toISOString() };
}

/** `<column> between from and to`: the condition every statement that finds rows by id adds for `partitionRange`. */
export function withinRange(column: string, range: PartitionRange): RawBuilder<SqlBool> {
  return sql<SqlBool>`${sql.ref(column)} between ${range.from}::timestamptz and ${range.to}::timestamptz`;
}

/** `entregas_p20261202` for the day that starts at 2026-12-02 00:00 UTC. */
export function partitionName(table: PartitionedTable, day: Date): string {
  return `${table}_p${day.toISOString().slice(0, 10).replaceAll('-', '')}`;
}

export const defaultPartitionName = (table: PartitionedTable): string => `${table}_default`;

const PARTITION_NAME = /_p(\d{4})(\d{2})(\d{2})$/;

/** A table's day partitions, oldest first, from the catalog (the DEFAULT partition is not one). */
export async function listDayPartitions(db: AnyDb, table: PartitionedTable): Promise<Array<{ name: string; day: Date }>> {
  const { rows } = await sql<{ name: string }>`
    select c.relname as name from pg_inherits i
    join pg_class c on c.oid = i.inhrelid
    where i.inhparent = to_regclass(${table})
    order by c.relname`.execute(db);
  return rows.flatMap(({ name }) => {
    const m = PARTITION_NAME.exec(name);
    if (!m || !name.startsWith(`${table}_p`)) return [];
    return [{ name, day: new Date(`${m[1]}-${m[2]}-${m[3]}T00:00:00Z`) }];
  });
}

/**
 * Makes `day`'s partition of `table` if it has none, moving into it the rows of that day the DEFAULT
 * partition holds (a partition cannot be attached over them). Run it in a transaction (the move
 * and the attach are one step). The partition is made apart and attached, which locks the parent
 * less than `create table ... partition of`: a lock no read or write waits for, but for the DEFAULT
 * partition's, held while it is checked to hold none of the day's rows. Returns true when it made one.
 */
export async function createDayPartition(trx: AnyDb, table: PartitionedTable, day: Date): Promise<boolean> {
  const name = partitionName(table, day);
  const exists = await sql<{ found: string | null }>`select to_regclass(${name})::text as found`.execute(trx);
  if (exists.rows[0]?.found) return false;
  const key = sql.ref(PARTITION_KEYS[table]);
  const from = day.toISOString();
  const to = addDays(day, 1).toISOString();
  // Defaults and checks only: the parent's indexes are made on the partition as it is attached.
  await sql`create table ${sql.table(name)} (like ${sql.table(table)} including defaults including constraints)`.execute(trx);
  const fallback = sql.table(defaultPartitionName(table));
  // The move deletes from the DEFAULT partition: actividad's append-only trigger lets that one through.
  await sql`select set_config('svc.partition_move', 'on', true)`.execute(trx);
  await sql`
    with moved as (delete from ${fallback} where ${key} >= ${from}::timestamptz and ${key} < ${to}::timestamptz returning *)
    insert into ${sql.table(name)} select * from moved`.execute(trx);
  await sql`select set_config('svc.partition_move', 'off', true)`.execute(trx);
  await sql`alter table ${sql.table(table)} attach partition ${sql.table(name)} for values from (${sql.lit(from)}) to (${sql.lit(to)})`.execute(trx);
  return true;
}

/**
 * Makes the partitions of each table from today to PARTITIONS_AHEAD_DAYS ahead, and of every day
 * its DEFAULT partition holds rows of (moving them). Safe with any number of processes at once:
 * each table's pass holds an advisory lock, and a partition is made only if it does not exist. A
 * table whose locks (that lock too) are not had within PARTITION_LOCK_TIMEOUT_MS is left to the next
 * pass. Returns the partitions made.
 */
export async function ensurePartitions(db: AnyDb, tables: readonly PartitionedTable[], now: Date = new Date()): Promise<string[]> {
  const made: string[] = [];
  const today = dayOf(now);
  for (const table of tables) {
    await ensureTable(db, table, today, made);
  }
  return made;
}

async function ensureTable(db: AnyDb, table: PartitionedTable, today: Date, made: string[]): Promise<void> {
  const mine: string[] = [];
  try {
    await db.transaction().execute(async (trx) => {
      await sql`select set_config('lock_timeout', ${`${PARTITION_LOCK_TIMEOUT_MS}ms`}, true)`.execute(trx);
      await sql`select pg_advisory_xact_lock(${UPKEEP_LOCK_CLASS}, hashtext(${table}))`.execute(trx);
      const key = sql.ref(PARTITION_KEYS[table]);
      const stray = await sql<{ day: Date }>`
        select distinct date_trunc('day', ${key}, 'UTC') as day from ${sql.table(defaultPartitionName(table))}`.execute(trx);
      const days = [...Array.from({ length: PARTITIONS_AHEAD_DAYS + 1 }, (_, i) => addDays(today, i)), ...stray.rows.map((r) => dayOf(new Date(r.day)))];
      for (const day of days) {
        if (await createDayPartition(trx, table, day)) mine.push(partitionName(table, day));
      }
    });
    made.push(...mine);
  } catch (err) {
    // Left to the next pass: the DEFAULT partition takes this table's rows meanwhile.
    if (!isLockTimeout(err)) throw err;
  }
}

/**
 * The day partitions of `table` whose whole day ended before `cutoff` (every row in them is older),
 * oldest first.
 */
export async function partitionsEndedBefore(db: AnyDb, table: PartitionedTable, cutoff: Date): Promise<Array<{ name: string; day: Date }>> {
  return (await listDayPartitions(db, table)).filter((p) => addDays(p.day, 1).getTime() <= cutoff.getTime());
}

/** Rows in one partition, counted before it is dropped (the retention's counter says what went). */
export async function countPartition(db: AnyDb, name: string): Promise<number> {
  const { rows } = await sql<{ n: string }>`select count(*) as n from ${sql.table(name)}`.execute(db);
  return Number(rows[0]?.n ?? 0);
}

/**
 * In the caller's transaction, bounds its lock waits and takes `tables` (parents first, then their
 * partitions) for itself, in the order given, so that what it checks in them holds until it drops
 * partitions: nothing else reads or writes them meanwhile. A drop locks the parent anyway; taking
 * the parents first, in the order the busiest statements name them (`outbox` before `entregas`, as
 * the fan-out's record does), keeps it from holding a partition that a running statement waits for
 * while it waits for that statement. Throws (lock_not_available) past PARTITION_LOCK_TIMEOUT_MS.
 */
export async function lockTables(trx: AnyDb, tables: readonly string[]): Promise<void> {
  await sql`select set_config('lock_timeout', ${`${PARTITION_LOCK_TIMEOUT_MS}ms`}, true)`.execute(trx);
  await sql`lock table ${sql.join(tables.map((n) => sql.table(n)))} in access exclusive mode`.execute(trx);
}

/** A retention's tries at a day's locks within one pass, and the pause between two. */
export const DROP_ATTEMPTS = 5;
export const DROP_RETRY_PAUSE_MS = 200;

/**
 * Runs `drop` (a transaction that takes its locks through `lockTables`) up to DROP_ATTEMPTS times
 * while its locks time out; undefined when every try did.
 */
export async function withLockRetries<R>(drop: () => Promise<R>): Promise<R | undefined> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await drop();
    } catch (err) {
      if (!isLockTimeout(err)) throw err;
      if (attempt >= DROP_ATTEMPTS) return undefined;
      await new Promise((resolve) => setTimeout(resolve, DROP_RETRY_PAUSE_MS));
    }
  }
}

export async function dropPartitions(trx: AnyDb, names: readonly string[]): Promise<void> {
  if (names.length === 0) return;
  await sql`drop table ${sql.join(names.map((n) => sql.table(n)))}`.execute(trx);
}

/** Postgres's lock_not_available: a partition's DDL that gave up waiting (PARTITION_LOCK_TIMEOUT_MS). */
export const isLockTimeout = (err: unknown): boolean => (err as { code?: unknown } | null)?.code === '55P03';

export interface PartitionUpkeep<R> {
  /** A first pass after `firstDelayMs`, then one every `intervalMs`. */
  start(): void;
  /** One pass now: the partitions ahead made, then `retire`'s drops; what `retire` returned. */
  runOnce(): Promise<R>;
  /** No new pass starts; waits for the one in progress. */
  stop(): Promise<void>;
}

/**
 * Partitions are made a week ahead and dropped a day at a time: an hour between passes leaves
 * days of slack for the first, and drops a day within the hour it comes of age.
 */
export const PARTITION_UPKEEP_INTERVAL_MS = 3_600_000;

/**
 * A service's periodic partition upkeep: each pass makes the partitions ahead of `ensure` (the
 * tables the service writes), then runs `retire` (its retention: the days it drops).
 */
export function createPartitionUpkeep<R>(options: {
  name: string;
  db: AnyDb;
  logger: Logger;
  ensure: readonly PartitionedTable[];
  retire: () => Promise<R>;
  intervalMs?: number;
  firstDelayMs: number;
}): PartitionUpkeep<R> {
  const { name, db, logger, ensure, retire } = options;
  const runOnce = async (): Promise<R> => {
    const made = await ensurePartitions(db, ensure);
    if (made.length > 0) logger.info({ partitions: made }, `${name}: partitions made`);
    return retire();
  };
  const task = createPeriodicTask({ name, logger, intervalMs: options.intervalMs ?? PARTITION_UPKEEP_INTERVAL_MS, firstDelayMs: options.firstDelayMs, run: runOnce });
  return { start: task.start, runOnce, stop: task.stop };
}

/**
 * Retention of a table with no owed rows (`actividad`, `idempotencia`): drops, oldest first, each
 * day partition whose whole day ended before `cutoff`, each in a short transaction that gives up
 * after PARTITION_LOCK_TIMEOUT_MS, DROP_ATTEMPTS times (then the next pass tries again). Returns the rows the dropped
 * partitions held, counted before each drop.
 */
export async function dropDaysEndedBefore(db: AnyDb, table: PartitionedTable, cutoff: Date): Promise<number> {
  let removed = 0;
  for (const { name } of await partitionsEndedBefore(db, table, cutoff)) {
    const rows = await countPartition(db, name);
    const dropped = await withLockRetries(() =>
      db.transaction().execute(async (trx) => {
        await lockTables(trx, [table, name]);
        await dropPartitions(trx, [name]);
        return true;
      }),
    );
    if (!dropped) break;
    removed += rows;
  }
  return removed;
}
