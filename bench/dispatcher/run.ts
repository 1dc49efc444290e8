// `pnpm bench:dispatcher`: one script, real Postgres and Redis, everything on loopback.
//  1. baseline: a no-op BullMQ worker (child process) empties a queue of N jobs;
//  2. saturation: the real dispatcher (child process, services/dispatcher/src/main.ts) fans out N
//     events queued beforehand and delivers each, signed, over HTTPS to a keep-alive receiver
//     (child process) that answers 200 at once; timed until every delivery is recorded `exitosa`;
//  3. paced: for each rate of BENCH_PACED_RATES (200,500 events/s), events committed (an outbox
//     row, then queued, as the gateway's relay does) at that rate for BENCH_PACED_LEAD_SECONDS
//     (not measured), then for BENCH_PACED_SECONDS;
//     commit → receipt at the receiver, and the latency of each hop from the event job's times.
//     Right before each, the no-op worker takes jobs added one at a time at the same rate, after the
//     same lead-in: its CPU per job is the baseline the dispatcher's CPU per delivery is divided by.
// For each dispatcher phase: CPU per delivery, Redis commands and BullMQ scripts per delivery and
// the commands called most; at the end a summary and the targets of issue 16.
// Method, what each figure includes, and figures: bench/README.md (dispatcher section).
import { execFileSync, type ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { bulkJobs, JOBS, queueFor, type ShipmentEventJob } from '@svc/schema';
import { cpuSnapshot, switchMeter, type Switches } from '../support/cpu';
import { freshDatabase, peakRssMb, stopChild } from '../support/bench-process';
import { addEvents, ask, benchWebhooks, child, eventJob, now, sleep, waitDelivered, webhooksVersionSql } from '../support/dispatcher-bench';
import { commandDelta, jobTimes, noscriptCommands, redisCommandStats, topCommands, type RedisCommandDelta } from '../support/redis-stats';
import { deletePrefix } from '../../test/support/redis-prefix';

const ROOT = join(__dirname, '..', '..');
const PG_BASE = (process.env.BENCH_DATABASE_BASE ?? 'postgres://postgres@127.0.0.1:5432').replace(/\/$/, '');
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const DB_NAME = 'svc_bench_dispatcher';
const PREFIX = `svcbench:disp:${randomBytes(4).toString('hex')}`;
const EVENTS = Number(process.env.BENCH_EVENTS ?? 20_000);
const WARMUP_EVENTS = Number(process.env.BENCH_WARMUP_EVENTS ?? 3000);
const WEBHOOKS = Number(process.env.BENCH_WEBHOOKS ?? 1);
// The dispatcher's own default (DISPATCHER_CONCURRENCY): issue 16's targets are at the default concurrency.
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 50);
const PACED_RATES = (process.env.BENCH_PACED_RATES ?? '200,500').split(',').map(Number).filter((r) => r > 0);
const PACED_SECONDS = Number(process.env.BENCH_PACED_SECONDS ?? 15);
/**
 * Seconds each paced phase (the no-op worker's and the dispatcher's) runs at its rate before it is
 * measured. Each process sits idle while the other is measured, and V8 may then run a full
 * collection that throws away optimized code (`weak objects` deoptimizations: 111 functions of the
 * dispatcher in one run, bench/README.md "sixth session"); without a lead-in, the figure at a rate
 * includes re-optimizing them. 0 measures from the first event, as the script did before.
 */
const PACED_LEAD_SECONDS = Number(process.env.BENCH_PACED_LEAD_SECONDS ?? 5);
/** Dispatcher CPU ms per delivery at 200/s of the code before issue 16, to compare with (target: at most half). */
const REF_CPU_200 = process.env.BENCH_REF_CPU_200 ? Number(process.env.BENCH_REF_CPU_200) : undefined;
/**
 * The same, as a multiple of the paced no-op worker's CPU per job at 200/s in its own run: the
 * code before issue 16 measured with this script. Preferred to BENCH_REF_CPU_200 when both are set:
 * on this kind of machine every process's CPU per delivery at a paced rate moves up and down
 * together by a third from one run to the next (bench/README.md), and the ratio cancels it.
 */
const REF_RATIO_200 = process.env.BENCH_REF_RATIO_200 ? Number(process.env.BENCH_REF_RATIO_200) : undefined;
const RECEIVER_PORT = Number(process.env.BENCH_RECEIVER_PORT ?? 3943);
const METRICS_PORT = Number(process.env.BENCH_METRICS_PORT ?? 3944);
const NOOP_QUEUE = 'bench-noop';
const NOOP_PACED_QUEUE = 'bench-noop-paced';
/** Connections the paced phases commit their outbox rows on (a late commit does not hold up the next). */
const PACER_CONNECTIONS = 16;
/** BullMQ keeps this many completed event jobs (and their times); older ones are removed. */
const KEPT_EVENT_JOBS = JOBS.shipmentEvent.options.removeOnComplete.count;

// ---- measuring ------------------------------------------------------------------------------------

/** CPU seconds each group used over `seconds`; `others` is the rest of the machine (neither these groups nor the bench process). */
interface Cpu {
  seconds: number;
  used: Record<string, number>;
}

/** Starts measuring the CPU of each group (pids, or every process whose name matches); call the result to read it. */
function cpuMeter(groups: Record<string, number | RegExp>): () => Cpu {
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
function cpuText(cpu: Cpu, units?: number): string {
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
interface Load {
  deliveries: number;
  cpu: Cpu;
  redis: RedisCommandDelta;
  /** The dispatcher's main thread, per delivery. */
  switches: Switches;
}

const perDelivery = (load: Load, group: string): number => ((load.cpu.used[group] ?? NaN) * 1000) / load.deliveries;
const scriptsPerDelivery = (load: Load): number => load.redis.scripts / load.deliveries;

/** Starts measuring a phase; call the result with the phase's number of deliveries to read it. */
async function loadMeter(b: Bench): Promise<(deliveries: number) => Promise<Load>> {
  const before = await redisCommandStats(b.redis);
  const switches = switchMeter(b.cpuGroups.dispatcher as number);
  const cpu = cpuMeter(b.cpuGroups);
  return async (deliveries) => {
    const used = cpu();
    return { deliveries, cpu: used, redis: commandDelta(before, await redisCommandStats(b.redis)), switches: switches(deliveries) };
  };
}

/** `note`: what the phase's Postgres and Redis figures include besides the dispatcher's own work. */
async function printLoad(b: Bench, load: Load, note: string): Promise<void> {
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
const switchText = (s: Switches): string => `${s.sleeps.toFixed(2)} sleeps, ${s.preemptions.toFixed(2)} preemptions (context switches, voluntary and not)`;

/** The p-th percentile of ascending `sorted` (undefined when empty). */
const pct = (sorted: readonly number[], p: number): number | undefined => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
const ms = (v: number | undefined): string => (v === undefined ? '-' : v.toFixed(1));
const ascending = (values: number[]): number[] => values.sort((x, y) => x - y);
const p50p99 = (values: number[]): string => {
  const s = ascending(values);
  return `${ms(pct(s, 50))} / ${ms(pct(s, 99))}`;
};

// ---- the bench's parts ------------------------------------------------------------------------------

interface Bench {
  check: pg.Client;
  /** The paced phases' connections (outbox rows, as the gateway writes them). */
  pool: pg.Pool;
  redis: Redis;
  eventsQueue: Queue<ShipmentEventJob>;
  receiver: ChildProcess;
  empresaId: string;
  /** The company's webhook count, which the gateway's events carry; undefined in a tree from before it. */
  webhooksVersion: number | undefined;
  cpuGroups: Record<string, number | RegExp>;
  /** Deliveries the dispatcher's counter (cumulative) should have reached so far. */
  delivered: number;
  /** Numbering of the bench's events (their `numeroGuia`). */
  nextEvent: number;
}

/** Waits until the receiver has had `expected` requests in all (asked over IPC: no load on the measured side). */
async function waitReceived(receiver: ChildProcess, expected: number, timeoutMs: number): Promise<void> {
  await waitCount(async () => (await ask<{ requests: number }>(receiver, { cmd: 'stats' }, 'requests')).requests, expected, timeoutMs, 'requests the receiver got');
}

/** Polls `count` (a child's counter, asked over IPC) until it reaches `expected`; `what` names it in the error. */
async function waitCount(count: () => Promise<number>, expected: number, timeoutMs: number, what: string): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const n = await count();
    if (n >= expected) return;
    if (Date.now() > until) throw new Error(`${what}: ${n} of ${expected}`);
    await sleep(20);
  }
}

/**
 * Calls `start(i)` for i = 0 .. count-1 at `rate` per second from now, each on time whether or not
 * the earlier ones have finished; resolves with the seconds it took once all have settled (the
 * first failure, if any, rejects).
 */
async function paced(rate: number, count: number, start: (i: number) => Promise<unknown>): Promise<number> {
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

const receiverStats = (b: Bench) => ask<{ requests: number; handshakes: number; resumed: number }>(b.receiver, { cmd: 'stats' }, 'requests');

async function recordedSuccesses(check: pg.Client): Promise<number> {
  const r = await check.query<{ n: string }>(`select count(*) n from entregas where estado = 'exitosa'`);
  return Number(r.rows[0]!.n);
}

async function commits(check: pg.Client): Promise<number> {
  return Number((await check.query<{ n: string }>(`select xact_commit n from pg_stat_database where datname = $1`, [DB_NAME])).rows[0]!.n);
}

/** A job for the no-op workers: an event's payload as a delivery job's, with the delivery jobs' options. */
const noopJob = (webhookId: string, payload: ShipmentEventJob) => ({
  name: 'noop',
  data: { ...payload, deliveryId: randomUUID(), webhookId },
  opts: { removeOnComplete: JOBS.delivery.options.removeOnComplete },
});

/** The no-op worker's rate over as many jobs as the saturation phase has deliveries. */
async function baseline(b: Bench, webhookId: string): Promise<number> {
  const jobs = EVENTS * WEBHOOKS;
  const noopQueue = new Queue(NOOP_QUEUE, { connection: b.redis, prefix: PREFIX });
  const payload = eventJob(b.empresaId, 0, new Date().toISOString());
  for (let i = 0; i < jobs; i += 1000) {
    await noopQueue.addBulk(Array.from({ length: Math.min(1000, jobs - i) }, () => noopJob(webhookId, payload)));
  }
  await noopQueue.close();
  const noop = child('noop-worker', 'bench/dispatcher/noop-worker.ts', {
    REDIS_URL,
    REDIS_PREFIX: PREFIX,
    NOOP_QUEUE,
    NOOP_JOBS: String(jobs),
    NOOP_CONCURRENCY: String(CONCURRENCY),
  }, true);
  const cpu = cpuMeter({ worker: noop.pid!, redis: /^redis-server$/ });
  const base = await ask<{ jobs: number; seconds: number }>(noop, {}, 'jobs');
  const cpuUsed = cpu();
  await stopChild(noop);
  const rate = base.jobs / base.seconds;
  console.log(
    `  baseline no-op BullMQ worker: ${base.jobs} jobs in ${base.seconds.toFixed(2)} s = ${Math.round(rate)} jobs/s; ` +
      `CPU (% of one core, start-up included): ${cpuText(cpuUsed)}`,
  );
  return rate;
}

/** The no-op worker (noop-worker.ts) kept running for the paced baselines, and the jobs it has finished so far. */
interface PacedNoop {
  worker: ChildProcess;
  queue: Queue;
  finished: number;
}

/** Waits until the paced no-op worker has finished `expected` jobs in all. */
async function waitNoop(noop: PacedNoop, expected: number, timeoutMs: number): Promise<void> {
  await waitCount(async () => (await ask<{ count: number }>(noop.worker, { cmd: 'count' }, 'count')).count, expected, timeoutMs, 'jobs the paced no-op worker finished');
}

/** Starts the paced no-op worker and warms it up (JIT, connections) with WARMUP_EVENTS jobs. */
async function startPacedNoop(b: Bench, webhookId: string): Promise<PacedNoop> {
  const queue = new Queue(NOOP_PACED_QUEUE, { connection: b.redis, prefix: PREFIX });
  const worker = child('noop-worker', 'bench/dispatcher/noop-worker.ts', {
    REDIS_URL,
    REDIS_PREFIX: PREFIX,
    NOOP_QUEUE: NOOP_PACED_QUEUE,
    NOOP_CONCURRENCY: String(CONCURRENCY),
  }, true);
  const payload = eventJob(b.empresaId, 0, new Date().toISOString());
  await queue.addBulk(Array.from({ length: WARMUP_EVENTS }, () => noopJob(webhookId, payload)));
  const noop = { worker, queue, finished: WARMUP_EVENTS };
  await waitNoop(noop, noop.finished, 60_000);
  return noop;
}

/**
 * The no-op worker's CPU per job, jobs added one at a time at `rate` for PACED_SECONDS as the paced
 * phase adds its events: what any BullMQ consumer costs per job at that rate on this machine, now.
 */
async function pacedNoopPhase(b: Bench, noop: PacedNoop, webhookId: string, rate: number): Promise<number> {
  const jobs = Math.round(rate * PACED_SECONDS);
  const payload = eventJob(b.empresaId, 0, new Date().toISOString());
  const feed = async (n: number): Promise<void> => {
    await paced(rate, n, () => noop.queue.addBulk([noopJob(webhookId, payload)]));
    noop.finished += n;
    await waitNoop(noop, noop.finished, 60_000);
  };
  await feed(Math.round(rate * PACED_LEAD_SECONDS));
  const switches = switchMeter(noop.worker.pid!);
  const cpu = cpuMeter({ worker: noop.worker.pid! });
  await feed(jobs);
  const used = cpu();
  const perJob = ((used.used.worker ?? NaN) * 1000) / jobs;
  console.log(
    `  no-op BullMQ worker paced ${rate}/s (jobs added one at a time, as the events below): ${perJob.toFixed(3)} CPU ms per job; ` +
      `main thread per job: ${switchText(switches(jobs))}`,
  );
  return perJob;
}

async function stopPacedNoop(noop: PacedNoop): Promise<void> {
  noop.worker.send({ cmd: 'exit' });
  await stopChild(noop.worker);
  await noop.queue.close();
}

interface Saturation {
  rate: number;
  load: Load;
}

/** The events queued while the queue is paused (workers take nothing from it), then timed from resume until every delivery is recorded. */
async function saturationPhase(b: Bench, baselineRate: number): Promise<Saturation> {
  const deliveries = EVENTS * WEBHOOKS;
  await b.eventsQueue.pause();
  const addsBefore = await redisCommandStats(b.redis);
  const queueStarted = now();
  await addEvents(b.eventsQueue, Array.from({ length: EVENTS }, () => eventJob(b.empresaId, b.nextEvent++, new Date().toISOString(), b.webhooksVersion)));
  const queuedIn = (now() - queueStarted) / 1000;
  const adds = commandDelta(addsBefore, await redisCommandStats(b.redis));
  const receivedBefore = await receiverStats(b);
  const commitsBefore = await commits(b.check);
  const meter = await loadMeter(b);
  const started = now();
  await b.eventsQueue.resume();
  await waitReceived(b.receiver, receivedBefore.requests + deliveries, 300_000);
  b.delivered += deliveries;
  const ended = await waitDelivered(METRICS_PORT, b.delivered, 60_000, 5);
  const load = await meter(deliveries);
  const seconds = (ended - started) / 1000;
  const commitCount = (await commits(b.check)) - commitsBefore;
  const recorded = await recordedSuccesses(b.check);
  if (recorded !== b.delivered) throw new Error(`${recorded} deliveries recorded, expected ${b.delivered}`);
  const receivedAfter = await receiverStats(b);
  const rate = deliveries / seconds;
  console.log(
    `  saturation: ${deliveries} deliveries recorded in ${seconds.toFixed(2)} s = ${Math.round(rate)} deliveries/s ` +
      `(${(rate / baselineRate).toFixed(3)} of the baseline); receiver got ${receivedAfter.requests - receivedBefore.requests} requests ` +
      `over ${receivedAfter.handshakes - receivedBefore.handshakes} new TLS connections; every delivery recorded exitosa in Postgres (${recorded} in all)`,
  );
  console.log(
    `    queued beforehand in ${queuedIn.toFixed(2)} s (as the relay does, bulks of 1000), per event: ${(adds.total / EVENTS).toFixed(1)} Redis commands, ` +
      `${(adds.scripts / EVENTS).toFixed(2)} scripts (not in the figures below)`,
  );
  console.log(`    Postgres commits per delivery: ${(commitCount / deliveries).toFixed(3)}`);
  await printLoad(b, load, 'the events were queued beforehand: Postgres and Redis serve the dispatcher alone');
  return { rate, load };
}

/**
 * Commits an outbox row in its own transaction, as the gateway writes it (with `counted`, reading the
 * company's webhook count into the job in the same statement); the moment before COMMIT.
 */
async function commitOutbox(pool: pg.Pool, job: ShipmentEventJob, counted: boolean): Promise<number> {
  const client = await pool.connect();
  try {
    await client.query('begin');
    const insert = `insert into outbox (id, empresa_id, sucursal_id, evento, data, request_id) values ($1, $2, null, $3, $4, $5)`;
    const { rows } = await client.query<{ v: string }>(
      counted ? `${insert} returning ${webhooksVersionSql('$2')} as v` : insert,
      [job.eventId, job.empresaId, job.evento, JSON.stringify(job.data), job.requestId],
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
 * `events` events at `rate` per second, each committed (commitOutbox) and then queued on its own, as
 * the relay would; an event whose turn has come starts without waiting for the one before it. The
 * moment before each COMMIT, by event id.
 */
async function paceEvents(b: Bench, rate: number, events: number): Promise<{ committed: Map<string, number>; seconds: number }> {
  const committed = new Map<string, number>();
  const seconds = await paced(rate, events, async () => {
    const job = eventJob(b.empresaId, b.nextEvent++, '');
    const commitAt = await commitOutbox(b.pool, job, b.webhooksVersion !== undefined);
    committed.set(job.eventId, commitAt);
    job.committedAt = new Date(commitAt).toISOString();
    await b.eventsQueue.addBulk(bulkJobs(JOBS.shipmentEvent, [job]));
  });
  return { committed, seconds };
}

/** Waits (up to `timeoutMs`) until the events queue has nothing waiting or active: every event job has finished. */
async function waitEventsFinished(b: Bench, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const c = await b.eventsQueue.getJobCounts('wait', 'active', 'delayed');
    if ((c.wait ?? 0) + (c.active ?? 0) + (c.delayed ?? 0) === 0 || Date.now() > until) return;
    await sleep(20);
  }
}

interface Paced {
  rate: number;
  /** The paced no-op worker's CPU ms per job at this rate, measured right before. */
  noopCpu: number;
  p50?: number;
  p99?: number;
  max?: number;
  load: Load;
}

/**
 * One paced phase: events at `rate` for PACED_SECONDS, until every delivery is recorded. Then,
 * outside the measured load: the receipts (the receiver's clock), the deliveries' events
 * (`entregas`), and the event jobs' times kept by BullMQ.
 */
async function pacedPhase(b: Bench, rate: number, noopCpu: number): Promise<Paced> {
  const events = Math.round(rate * PACED_SECONDS);
  const deliveries = events * WEBHOOKS;
  const feed = async (n: number): Promise<Awaited<ReturnType<typeof paceEvents>>> => {
    const result = await paceEvents(b, rate, n);
    b.delivered += n * WEBHOOKS;
    await waitDelivered(METRICS_PORT, b.delivered, 60_000);
    return result;
  };
  await feed(Math.round(rate * PACED_LEAD_SECONDS));
  await ask(b.receiver, { cmd: 'record' }, 'ok');
  const meter = await loadMeter(b);
  const { committed, seconds } = await feed(events);
  const load = await meter(deliveries);

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
  const result: Paced = { rate, noopCpu, p50: pct(sorted, 50), p99: pct(sorted, 99), max: sorted[sorted.length - 1], load };
  const achieved = events / seconds;
  console.log(
    `  paced ${rate}/s: ${events} events committed and queued in ${seconds.toFixed(2)} s (${achieved.toFixed(0)}/s` +
      `${achieved < 0.95 * rate ? ': BEHIND, the bench could not commit and queue them at the rate asked' : ''}), ` +
      `${seen.size} of ${deliveries} deliveries received; commit → receipt p50 ${ms(result.p50)} ms, p99 ${ms(result.p99)} ms, max ${ms(result.max)} ms`,
  );
  console.log(
    `    hops, p50 / p99 ms (event job times of ${times.size} of ${events} events: BullMQ keeps the last ${KEPT_EVENT_JOBS} completed; ` +
      `its times are whole ms): commit → queued ${p50p99(queued)}; queued → taken ${p50p99(taken)}; taken → receipt ${p50p99(sent)}; ` +
      `receipt → event job finished ${p50p99(finished)} (negative: the event job finished before the receipt)`,
  );
  await printLoad(b, load, "Postgres and Redis include the bench's commit and add of each event, as the gateway's would be");
  console.log(
    `    dispatcher CPU per delivery ${perDelivery(load, 'dispatcher').toFixed(3)} ms = ${(perDelivery(load, 'dispatcher') / noopCpu).toFixed(2)} x the no-op worker's per job at this rate`,
  );
  return result;
}

// ---- the report ---------------------------------------------------------------------------------

function printSummary(saturation: Saturation, paced: Paced[]): void {
  const row = (name: string, perSecond: number, load: Load, noopCpu: number | undefined, latency: string): string =>
    `  ${name.padEnd(12)} ${String(Math.round(perSecond)).padStart(6)}  ` +
    `${['dispatcher', 'postgres', 'redis'].map((g) => perDelivery(load, g).toFixed(3)).join(' / ').padEnd(23)}  ` +
    `${(noopCpu === undefined ? '-' : (perDelivery(load, 'dispatcher') / noopCpu).toFixed(2)).padStart(7)}  ` +
    `${(load.redis.total / load.deliveries).toFixed(1).padStart(8)}  ${scriptsPerDelivery(load).toFixed(2).padStart(7)}  ` +
    `${load.switches.sleeps.toFixed(2).padStart(6)}  ${latency}`;
  console.log(
    `summary, per delivery:  deliv/s  CPU ms dispatcher / postgres / redis  x no-op  Redis cmds  scripts  sleeps  commit → receipt p50 / p99 / max ms`,
  );
  for (const p of paced) console.log(row(`paced ${p.rate}/s`, p.rate * WEBHOOKS, p.load, p.noopCpu, `${ms(p.p50)} / ${ms(p.p99)} / ${ms(p.max)}`));
  console.log(row('saturation', saturation.rate, saturation.load, undefined, '-'));
  console.log(`  (x no-op: the dispatcher's CPU per delivery over the paced no-op worker's CPU per job at the same rate, measured right before;`);
  console.log(`   sleeps: voluntary context switches of the dispatcher's main thread)`);
}

function printTargets(saturation: Saturation, baselineRate: number, paced: Paced[]): void {
  const verdict = (ok: boolean): string => (ok ? 'met' : 'MISSED');
  const p99At = (rate: number, limit: number): string => {
    const p = paced.find((x) => x.rate === rate);
    return p?.p99 === undefined ? `p99 <= ${limit} ms at ${rate}/s: not measured` : `p99 <= ${limit} ms at ${rate}/s ${verdict(p.p99 <= limit)} (${ms(p.p99)})`;
  };
  const ratio = saturation.rate / baselineRate;
  const scripts = scriptsPerDelivery(saturation.load);
  const at200 = paced.find((x) => x.rate === 200);
  const cpu200 = at200 ? perDelivery(at200.load, 'dispatcher') : undefined;
  const ratio200 = at200 && cpu200 !== undefined ? cpu200 / at200.noopCpu : undefined;
  const cpuPart =
    cpu200 === undefined || ratio200 === undefined
      ? 'dispatcher CPU per delivery at 200/s: not measured'
      : REF_RATIO_200 !== undefined
        ? `dispatcher CPU per delivery at 200/s <= half of the code before, as multiples of the no-op worker's: ` +
          `${ratio200.toFixed(2)} <= ${REF_RATIO_200} / 2 ${verdict(ratio200 <= REF_RATIO_200 / 2)} (${cpu200.toFixed(3)} ms)`
        : REF_CPU_200 !== undefined
          ? `dispatcher CPU per delivery at 200/s <= half of ${REF_CPU_200} ms ${verdict(cpu200 <= REF_CPU_200 / 2)} (${cpu200.toFixed(3)} ms)`
          : `dispatcher CPU per delivery at 200/s ${cpu200.toFixed(3)} ms, ${ratio200.toFixed(2)} x the no-op worker's (no reference: BENCH_REF_RATIO_200 and BENCH_REF_CPU_200 unset)`;
  console.log(
    `targets (issue 16): >= 3500 deliveries/s at saturation ${verdict(saturation.rate >= 3500)} (${Math.round(saturation.rate)}); ` +
      `>= 0.18 of the no-op worker ${verdict(ratio >= 0.18)} (${ratio.toFixed(3)}); ${p99At(200, 15)}; ${p99At(500, 40)}; ` +
      `<= 2 BullMQ scripts per delivery at saturation ${verdict(scripts <= 2)} (${scripts.toFixed(2)}); ${cpuPart}`,
  );
}

// ---- the run -------------------------------------------------------------------------------------

async function main(): Promise<void> {
  execFileSync(process.execPath, ['scripts/test-certs.mjs'], { cwd: ROOT, stdio: 'inherit' });
  console.log(
    `bench:dispatcher: ${EVENTS} events x ${WEBHOOKS} webhook(s), concurrency ${CONCURRENCY}, paced ${PACED_RATES.join(', ')} events/s ` +
      `for ${PACED_SECONDS} s each (after ${PACED_LEAD_SECONDS} s at the rate, not measured); load average before: ${loadavg().map((l) => l.toFixed(2)).join(' ')}`,
  );
  const databaseUrl = await freshDatabase(PG_BASE, DB_NAME);
  const check = new pg.Client({ connectionString: databaseUrl });
  await check.connect();
  const pool = new pg.Pool({ connectionString: databaseUrl, max: PACER_CONNECTIONS, idleTimeoutMillis: 0 });
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const eventsQueue = queueFor(JOBS.shipmentEvent, { connection: redis, prefix: PREFIX });

  const receiver = child('receiver', 'bench/dispatcher/receiver.ts', { RECEIVER_PORT: String(RECEIVER_PORT) }, true);
  let dispatcher: ChildProcess | undefined;
  try {
    await ask(receiver, {}, 'listening');
    const { empresaId, webhookIds, webhooksVersion } = await benchWebhooks(check, { nombre: 'Bench', receiverPort: RECEIVER_PORT, count: WEBHOOKS });
    const b: Bench = { check, pool, redis, eventsQueue, receiver, empresaId, webhooksVersion, cpuGroups: {}, delivered: 0, nextEvent: 0 };

    const baselineRate = await baseline(b, webhookIds[0]!);

    // Warm-up: JIT, connection pools, the TLS connections (and the pacer's connections).
    await addEvents(eventsQueue, Array.from({ length: WARMUP_EVENTS }, () => eventJob(empresaId, b.nextEvent++, new Date().toISOString(), webhooksVersion)));
    dispatcher = child('dispatcher', 'services/dispatcher/src/main.ts', {
      DATABASE_URL: databaseUrl,
      REDIS_URL,
      REDIS_PREFIX: PREFIX,
      DISPATCHER_METRICS_PORT: String(METRICS_PORT),
      DISPATCHER_CONCURRENCY: String(CONCURRENCY),
      DISPATCH_HOST_MAP: 'receiver.test=127.0.0.1',
      DISPATCH_ALLOW_CIDRS: '127.0.0.0/8',
      NODE_EXTRA_CA_CERTS: join(ROOT, '.test-certs', 'ca.pem'),
      LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'info',
      // BENCH_DISPATCHER_NODE_ARGS: e.g. '--cpu-prof --cpu-prof-dir=/tmp/prof' to profile the dispatcher.
    }, false, process.env.BENCH_DISPATCHER_NODE_ARGS?.split(' ').filter(Boolean));
    b.cpuGroups = { dispatcher: dispatcher.pid!, receiver: receiver.pid!, postgres: /^postgres$/, redis: /^redis-server$/ };
    b.delivered = WARMUP_EVENTS * WEBHOOKS;
    await Promise.all(Array.from({ length: PACER_CONNECTIONS }, () => pool.query('select 1')));
    await waitDelivered(METRICS_PORT, b.delivered, 120_000);
    console.log(`  warm-up: ${b.delivered} deliveries recorded`);

    const saturation = await saturationPhase(b, baselineRate);
    b.nextEvent = 10_000_000;
    const paced: Paced[] = [];
    if (PACED_RATES.length > 0) {
      const noop = await startPacedNoop(b, webhookIds[0]!);
      try {
        for (const rate of PACED_RATES) {
          const noopCpu = await pacedNoopPhase(b, noop, webhookIds[0]!, rate);
          paced.push(await pacedPhase(b, rate, noopCpu));
        }
      } finally {
        await stopPacedNoop(noop);
      }
    }

    const rss = peakRssMb(dispatcher.pid!);
    const totals = await receiverStats(b);
    const counts = await check.query<{ estado: string; n: string }>(`select estado, count(*) n from entregas group by estado order by estado`);
    console.log(`  dispatcher peak RSS (VmHWM): ${rss} MB`);
    console.log(`  TLS: ${totals.handshakes} connections opened (${totals.resumed} resumed sessions) for ${totals.requests} deliveries in the whole run`);
    console.log(`  deliveries by state: ${counts.rows.map((r) => `${r.estado} ${r.n}`).join(', ')}`);
    console.log(`  load average after: ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
    printSummary(saturation, paced);
    printTargets(saturation, baselineRate, paced);
  } finally {
    if (dispatcher) await stopChild(dispatcher);
    receiver.send({ cmd: 'exit' });
    await stopChild(receiver);
    await eventsQueue.close();
    await deletePrefix(redis, PREFIX);
    redis.disconnect();
    await pool.end();
    await check.end();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
