// What the phases of `pnpm bench:dispatcher` share: the run's parts (database, Redis, queues, the
// receiver and the dispatcher), the measures of a phase (CPU, Redis commands, context switches,
// peak memory), pacing, and the paced phase itself (commit → receipt, with its hops).
import type { ChildProcess } from 'node:child_process';
import type pg from 'pg';
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { bulkJobs, JOBS, type DeliveryJob, type ShipmentEventJob } from '@svc/contracts';
import { cpuSnapshot, switchMeter, type Switches } from '../support/cpu';
import { peakRssMb, resetPeakRss, type ServiceBuild } from '../support/bench-process';
import { ask, deliveredCount, now, sleep, waitDelivered, webhooksVersionSql } from '../support/dispatcher-bench';
import { commandDelta, jobTimes, noscriptCommands, redisCommandStats, topCommands, type RedisCommandDelta } from '../support/redis-stats';
import { DB_NAME, METRICS_PORT, PACED_LEAD_SECONDS, PACED_SECONDS, PREFIX } from './settings';

/** Connections the paced phases commit their outbox rows on (a late commit does not hold up the next). */
export const PACER_CONNECTIONS = 16;
/** BullMQ keeps this many completed event jobs (and their times); older ones are removed. */
const KEPT_EVENT_JOBS = JOBS.shipmentEvent.options.removeOnComplete.count;

// ---- the bench's parts ------------------------------------------------------------------------------

export interface Bench {
  build: ServiceBuild;
  databaseUrl: string;
  check: pg.Client;
  /** The paced phases' connections (outbox rows, as the gateway writes them). */
  pool: pg.Pool;
  redis: Redis;
  eventsQueue: Queue<ShipmentEventJob>;
  deliveryQueue: Queue<DeliveryJob>;
  receiver: ChildProcess;
  dispatcher: ChildProcess | undefined;
  empresaId: string;
  /** The company's webhook count, which the gateway's events carry; undefined in a tree from before it. */
  webhooksVersion: number | undefined;
  cpuGroups: Record<string, number | RegExp>;
  /** Deliveries the dispatcher's counter (cumulative, every outcome) should have reached so far. */
  delivered: number;
  /** Numbering of the bench's events (their `numeroGuia`). */
  nextEvent: number;
}

// ---- measuring ------------------------------------------------------------------------------------

/** CPU seconds each group used over `seconds`; `others` is the rest of the machine (neither these groups nor the bench process). */
export interface Cpu {
  seconds: number;
  used: Record<string, number>;
}

/** Starts measuring the CPU of each group (pids, or every process whose name matches); call the result to read it. */
export function cpuMeter(groups: Record<string, number | RegExp>): () => Cpu {
  const started = now();
  const before = cpuSnapshot(groups);
  return () => {
    const after = cpuSnapshot(groups);
    const used: Record<string, number> = {};
    let ours = after.bench! - before.bench!;
    for (const k of Object.keys(groups)) {
      const seconds = Math.max(0, after[k]! - before[k]!);
      used[k] = seconds;
      ours += seconds;
    }
    used.others = Math.max(0, after.machine! - before.machine! - ours);
    return { seconds: (now() - started) / 1000, used };
  };
}

/** `dispatcher 45% (0.250 ms/delivery), ...; total ... CPU ms per delivery` (`others` in % only, out of the total). */
export function cpuText(cpu: Cpu, units?: number): string {
  let total = 0;
  const parts = Object.entries(cpu.used).map(([k, used]) => {
    const share = `${k} ${Math.round((used / cpu.seconds) * 100)}%`;
    if (!units || k === 'others') return share;
    total += used;
    return `${share} (${((used * 1000) / units).toFixed(3)} ms/delivery)`;
  });
  return parts.join(', ') + (units ? `; total ${((total * 1000) / units).toFixed(3)} CPU ms per delivery (others apart)` : '');
}

/** What a dispatcher phase cost: CPU of each process and the commands Redis ran (every client of it). */
export interface Load {
  deliveries: number;
  cpu: Cpu;
  redis: RedisCommandDelta;
  /** The dispatcher's main thread, per delivery. */
  switches: Switches;
}

export const perDelivery = (load: Load, group: string): number => ((load.cpu.used[group] ?? NaN) * 1000) / load.deliveries;
export const scriptsPerDelivery = (load: Load): number => load.redis.scripts / load.deliveries;

/** Starts measuring a phase; call the result with the phase's number of deliveries to read it. */
export async function loadMeter(b: Bench): Promise<(deliveries: number) => Promise<Load>> {
  const before = await redisCommandStats(b.redis);
  const switches = switchMeter(b.cpuGroups.dispatcher as number);
  const cpu = cpuMeter(b.cpuGroups);
  return async (deliveries) => {
    const used = cpu();
    return { deliveries, cpu: used, redis: commandDelta(before, await redisCommandStats(b.redis)), switches: switches(deliveries) };
  };
}

/** `note`: what the phase's Postgres and Redis figures include besides the dispatcher's own work. */
export async function printLoad(b: Bench, load: Load, note: string): Promise<void> {
  const d = load.deliveries;
  const roundTrips = await noscriptCommands(b.redis, load.redis.calls.keys());
  console.log(`    CPU (% of one core; ${note}): ${cpuText(load.cpu, d)}`);
  console.log(`    dispatcher's main thread per delivery: ${switchText(load.switches)}`);
  console.log(
    `    Redis per delivery (every client of this Redis counts, other sessions' too): ` +
      `${(load.redis.total / d).toFixed(1)} commands (those run inside scripts included), ${scriptsPerDelivery(load).toFixed(2)} BullMQ scripts ` +
      `(evalsha/eval/fcall calls); most called: ${topCommands(load.redis.calls, d)}; ` +
      `most called of those no script can run (each a client's round trip): ${topCommands(load.redis.calls, d, 5, roundTrips)}`,
  );
}

/** `4.40 sleeps, 2.50 preemptions` (context switches, voluntary and not). */
export const switchText = (s: Switches): string => `${s.sleeps.toFixed(2)} sleeps, ${s.preemptions.toFixed(2)} preemptions (context switches, voluntary and not)`;

/** The p-th percentile of ascending `sorted` (undefined when empty). */
export const pct = (sorted: readonly number[], p: number): number | undefined => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
export const ms = (v: number | undefined): string => (v === undefined ? '-' : v.toFixed(1));
export const ascending = (values: number[]): number[] => values.sort((x, y) => x - y);
export const p50p99 = (values: number[]): string => {
  const s = ascending(values);
  return `${ms(pct(s, 50))} / ${ms(pct(s, 99))}`;
};

/** Peak memory of a phase: each process's peak resident memory and the most sends the receivers held at once. */
export interface Memory {
  /** MB, by process name (`dispatcher`, `gateway`). */
  rss: Record<string, number>;
  /** The most requests the receivers held at once (sends in flight as they see them). */
  peakInFlight: number;
}

/** Starts a phase's memory measure (each pid's peak RSS anew, the receivers' peak in flight anew); call the result to read it. */
export async function memoryMeter(b: Bench, pids: Record<string, number | undefined>): Promise<() => Promise<Memory>> {
  for (const pid of Object.values(pids)) if (pid !== undefined) resetPeakRss(pid);
  await ask(b.receiver, { cmd: 'peak' }, 'peakInFlight');
  return async () => {
    const rss: Record<string, number> = {};
    for (const [name, pid] of Object.entries(pids)) if (pid !== undefined) rss[name] = peakRssMb(pid);
    const { peakInFlight } = await ask<{ peakInFlight: number }>(b.receiver, { cmd: 'peak' }, 'peakInFlight');
    return { rss, peakInFlight };
  };
}

export const memoryText = (m: Memory): string =>
  `peak RSS (VmHWM over the phase) ${Object.entries(m.rss).map(([k, v]) => `${k} ${v} MB`).join(', ')}; at most ${m.peakInFlight} requests held by the receivers at once`;

// ---- waiting and pacing -----------------------------------------------------------------------------

/** Polls `count` (a child's counter, asked over IPC) until it reaches `expected`; `what` names it in the error. */
export async function waitCount(count: () => Promise<number>, expected: number, timeoutMs: number, what: string): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const n = await count();
    if (n >= expected) return;
    if (Date.now() > until) throw new Error(`${what}: ${n} of ${expected}`);
    await sleep(20);
  }
}

export const receiverStats = (b: Bench) => ask<{ requests: number; answered: number; handshakes: number; resumed: number }>(b.receiver, { cmd: 'stats' }, 'requests');

/** Waits until the receiver has had `expected` requests in all (asked over IPC: no load on the measured side). */
export async function waitReceived(b: Bench, expected: number, timeoutMs: number): Promise<void> {
  await waitCount(async () => (await receiverStats(b)).requests, expected, timeoutMs, 'requests the receiver got');
}

/** Sets how the receivers answer: `delayMs` after each request's body, and never to the paths of `hang`. */
export async function configureReceiver(b: Bench, delayMs: number, hang: readonly string[] = []): Promise<void> {
  await ask(b.receiver, { cmd: 'config', delayMs, hang }, 'configured');
}

/**
 * Calls `start(i)` for i = 0 .. count-1 at `rate` per second from now, each on time whether or not
 * the earlier ones have finished; resolves with the seconds it took once all have settled (the
 * first failure, if any, rejects).
 */
export async function paced(rate: number, count: number, start: (i: number) => Promise<unknown>): Promise<number> {
  const inFlight: Array<Promise<unknown>> = [];
  let failure: unknown;
  const t0 = now();
  for (let i = 0; i < count; ) {
    const due = Math.min(count, Math.floor(((now() - t0) * rate) / 1000) + 1);
    for (; i < due; i++) inFlight.push(start(i).catch((err: unknown) => void (failure ??= err)));
    if (i < count) await sleep(t0 + (i * 1000) / rate - now());
  }
  await Promise.all(inFlight);
  if (failure) throw failure;
  return (now() - t0) / 1000;
}

/** Waits (up to `timeoutMs`) until the events queue has nothing waiting or active: every event job has finished. */
export async function waitEventsFinished(b: Bench, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const c = await b.eventsQueue.getJobCounts('wait', 'active', 'delayed');
    if ((c.wait ?? 0) + (c.active ?? 0) + (c.delayed ?? 0) === 0 || Date.now() > until) return;
    await sleep(20);
  }
}

/**
 * Waits until neither queue holds work (waiting, active, delayed: retries and deferrals included)
 * twice in a row, then takes the dispatcher's count of ended deliveries as the run's new total.
 */
export async function waitIdle(b: Bench, timeoutMs: number): Promise<void> {
  const states = ['wait', 'active', 'delayed', 'paused', 'prioritized', 'waiting-children'] as const;
  const busy = async (): Promise<number> => {
    const [e, d] = await Promise.all([b.eventsQueue.getJobCounts(...states), b.deliveryQueue.getJobCounts(...states)]);
    return Object.values(e).reduce((s, n) => s + n, 0) + Object.values(d).reduce((s, n) => s + n, 0);
  };
  const until = Date.now() + timeoutMs;
  let quiet = 0;
  while (quiet < 2) {
    const left = await busy();
    quiet = left === 0 ? quiet + 1 : 0;
    if (left > 0 && Date.now() > until) throw new Error(`the queues still hold ${left} jobs after ${timeoutMs / 1000} s`);
    await sleep(200);
  }
  b.delivered = await deliveredCount([METRICS_PORT]);
}

export async function commits(check: pg.Client): Promise<number> {
  return Number((await check.query<{ n: string }>(`select xact_commit n from pg_stat_database where datname = $1`, [DB_NAME])).rows[0]!.n);
}

/**
 * Commits an outbox row in its own transaction, as the gateway writes it (with `counted`, reading the
 * company's webhook count into the job in the same statement); the moment before COMMIT.
 */
export async function commitOutbox(pool: pg.Pool, job: ShipmentEventJob, counted: boolean): Promise<number> {
  const client = await pool.connect();
  try {
    await client.query('begin');
    const insert = `insert into outbox (id, empresa_id, sucursal_id, evento, data, request_id) values ($1, $2, $3, $4, $5, $6)`;
    const { rows } = await client.query<{ v: string }>(
      counted ? `${insert} returning ${webhooksVersionSql('$2')} as v` : insert,
      [job.eventId, job.empresaId, job.sucursalId, job.evento, JSON.stringify(job.data), job.requestId],
    );
    if (counted) job.webhooksVersion = Number(rows[0]!.v);
    const commitAt = now();
    await client.query('commit');
    return commitAt;
  } finally {
    client.release();
  }
}

/**
 * `events` events at `rate` per second, each made by `makeJob`, committed (commitOutbox) and then
 * queued on its own, as the relay would; an event whose turn has come starts without waiting for the
 * one before it. The moment before each COMMIT, by event id.
 */
async function paceEvents(
  b: Bench,
  rate: number,
  events: number,
  makeJob: () => ShipmentEventJob,
): Promise<{ committed: Map<string, number>; seconds: number }> {
  const committed = new Map<string, number>();
  const seconds = await paced(rate, events, async () => {
    const job = makeJob();
    const commitAt = await commitOutbox(b.pool, job, b.webhooksVersion !== undefined);
    committed.set(job.eventId, commitAt);
    job.committedAt = new Date(commitAt).toISOString();
    await b.eventsQueue.addBulk(bulkJobs(JOBS.shipmentEvent, [job]));
  });
  return { committed, seconds };
}

/** Where a paced phase's events go. */
export interface PacedTarget {
  /** How the phase is named in the output (`paced 200/s`, `fleet paced 500/s at 100 ms`). */
  label: string;
  /** Makes the next event (its `committedAt` and count are filled in when it is committed). */
  makeJob: () => ShipmentEventJob;
  /** Deliveries each event makes. */
  perEvent: number;
  /** How long the receivers take to answer (ms). */
  latencyMs: number;
}

export interface Paced {
  label: string;
  rate: number;
  latencyMs: number;
  /** The paced no-op worker's CPU ms per job at this rate, measured right before (none for the fleet's). */
  noopCpu: number | undefined;
  /** commit → receipt (the request's arrival at the receiver, before its latency). */
  p50?: number;
  p99?: number;
  max?: number;
  /** Events committed per second as the bench managed them. */
  achieved: number;
  load: Load;
  memory: Memory;
}

/**
 * One paced phase: events at `rate` for PACED_SECONDS, after PACED_LEAD_SECONDS not measured, until
 * every delivery is recorded. Then, outside the measured load: the receipts (the receiver's clock),
 * the deliveries' events (`entregas`), and the event jobs' times kept by BullMQ.
 */
export async function pacedPhase(b: Bench, rate: number, noopCpu: number | undefined, target: PacedTarget): Promise<Paced> {
  const events = Math.round(rate * PACED_SECONDS);
  const deliveries = events * target.perEvent;
  // However far behind the dispatcher falls, it has this long to catch up before the phase fails.
  const catchUpMs = 60_000 + (target.latencyMs > 0 ? 120_000 : 0);
  const feed = async (n: number): Promise<Awaited<ReturnType<typeof paceEvents>>> => {
    const result = await paceEvents(b, rate, n, target.makeJob);
    b.delivered += n * target.perEvent;
    await waitDelivered(METRICS_PORT, b.delivered, catchUpMs);
    return result;
  };
  const memory = await memoryMeter(b, { dispatcher: b.dispatcher?.pid });
  await feed(Math.round(rate * PACED_LEAD_SECONDS));
  await ask(b.receiver, { cmd: 'record' }, 'ok');
  const meter = await loadMeter(b);
  const { committed, seconds } = await feed(events);
  const load = await meter(deliveries);
  const mem = await memory();

  const { receipts } = await ask<{ receipts: Array<[string, number]> }>(b.receiver, { cmd: 'receipts' }, 'receipts');
  await waitEventsFinished(b, 10_000);
  const times = await jobTimes(b.redis, PREFIX, JOBS.shipmentEvent.queue, [...committed.keys()]);
  // A receipt names its delivery (X-Request-Id); the delivery's row names its event.
  const eventOf = new Map(
    (
      await b.check.query<{ id: string; evento_id: string }>(`select id, evento_id from entregas where evento_id = any($1::uuid[])`, [[...committed.keys()]])
    ).rows.map((r) => [r.id, r.evento_id]),
  );

  // Per event: (a) commit → queued, (b) queued → taken. Per delivery (its first receipt):
  // commit → receipt, (c) taken → receipt, (d) receipt → event job finished.
  const queued: number[] = [];
  const taken: number[] = [];
  for (const [eventId, commitAt] of committed) {
    const t = times.get(eventId);
    if (!t) continue;
    queued.push(t.timestamp - commitAt);
    if (t.processedOn !== undefined) taken.push(t.processedOn - t.timestamp);
  }
  const latencies: number[] = [];
  const sent: number[] = [];
  const finished: number[] = [];
  const seen = new Set<string>();
  for (const [deliveryId, at] of receipts) {
    const eventId = eventOf.get(deliveryId);
    const commitAt = eventId === undefined ? undefined : committed.get(eventId);
    if (commitAt === undefined || seen.has(deliveryId)) continue;
    seen.add(deliveryId);
    latencies.push(at - commitAt);
    const t = times.get(eventId!);
    if (t?.processedOn !== undefined) sent.push(at - t.processedOn);
    if (t?.finishedOn !== undefined) finished.push(t.finishedOn - at);
  }
  const sorted = ascending(latencies);
  const achieved = events / seconds;
  const result: Paced = {
    label: target.label,
    rate,
    latencyMs: target.latencyMs,
    noopCpu,
    p50: pct(sorted, 50),
    p99: pct(sorted, 99),
    max: sorted[sorted.length - 1],
    achieved,
    load,
    memory: mem,
  };
  const answered = target.latencyMs > 0 ? ` (the receivers answer ${target.latencyMs} ms after it: commit → answer p99 ${ms((result.p99 ?? NaN) + target.latencyMs)} ms)` : '';
  console.log(
    `  ${target.label}: ${events} events committed and queued in ${seconds.toFixed(2)} s (${achieved.toFixed(0)}/s` +
      `${achieved < 0.95 * rate ? ': BEHIND, the bench could not commit and queue them at the rate asked' : ''}), ` +
      `${seen.size} of ${deliveries} deliveries received; commit → receipt p50 ${ms(result.p50)} ms, p99 ${ms(result.p99)} ms, max ${ms(result.max)} ms${answered}`,
  );
  console.log(
    `    hops, p50 / p99 ms (event job times of ${times.size} of ${events} events: BullMQ keeps the last ${KEPT_EVENT_JOBS} completed; ` +
      `its times are whole ms): commit → queued ${p50p99(queued)}; queued → taken ${p50p99(taken)}; taken → receipt ${p50p99(sent)}; ` +
      `receipt → event job finished ${p50p99(finished)} (negative: the event job finished before the receipt)`,
  );
  await printLoad(b, load, "Postgres and Redis include the bench's commit and add of each event, as the gateway's would be");
  const cpu = perDelivery(load, 'dispatcher');
  console.log(
    `    dispatcher CPU per delivery ${cpu.toFixed(3)} ms` +
      (noopCpu === undefined ? '' : ` = ${(cpu / noopCpu).toFixed(2)} x the no-op worker's per job at this rate`) +
      `; ${memoryText(mem)}`,
  );
  return result;
}
