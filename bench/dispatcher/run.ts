// `pnpm bench:dispatcher`: one script, real Postgres and Redis, everything on loopback, the services
// from their compiled build (`pnpm build`, as `pnpm start:prod`) unless BENCH_BUILD=src.
// Issue 16's phases, to one company with one webhook whose receiver answers at once:
//  1. baseline: a no-op BullMQ worker (child process) empties a queue of N jobs;
//  2. saturation: the real dispatcher (child process) fans out N events queued beforehand and
//     delivers each, signed, over HTTPS to a keep-alive receiver (child process) that answers 200 at
//     once; timed until every delivery is recorded `exitosa`;
//  3. paced: for each rate of BENCH_PACED_RATES (200,500 events/s), events committed (an outbox
//     row, then queued, as the gateway's relay does) at that rate for BENCH_PACED_LEAD_SECONDS
//     (not measured), then for BENCH_PACED_SECONDS; commit → receipt at the receiver, and the
//     latency of each hop from the event job's times. Right before each, the no-op worker takes
//     jobs added one at a time at the same rate, after the same lead-in: its CPU per job is the
//     baseline the dispatcher's CPU per delivery is divided by.
// Issue 30's, to a fleet of 100 companies with 1,000 webhooks between them (one origin per
// company), whose receivers take their time (real-receivers.ts, end-to-end.ts):
//  4. latency: the fleet saturated with receivers answering after 0, 100 and 500 ms;
//  5. fleet paced: commit → receipt at 500 events/s with receivers at 100 ms;
//  6. end to end: shipments created through the gateway's batch API at 500/s, to each webhook's receipt;
//  7. hang: 1% of the webhooks never answer, the others at 100 ms, saturated;
//  8. retry: during 7, failing webhooks' gaps between attempts, measured at the receiver.
// For each phase: CPU per delivery, Redis commands and BullMQ scripts per delivery, peak RSS of
// each service and the most sends in flight; at the end a summary, and the targets of issues 16 and 30.
// Method, what each figure includes, and figures: bench/README.md (dispatcher section).
import { execFileSync, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { JOBS, type ShipmentEventJob } from '@svc/contracts';
import { queueFor } from '@svc/platform';
import { switchMeter } from '../support/cpu';
import { endRun, freshDatabase, prepareBuild, serviceArgs, stopChild } from '../support/bench-process';
import { addEvents, ask, benchWebhooks, child, eventJob, now, spawned, waitDelivered } from '../support/dispatcher-bench';
import { commandDelta, redisCommandStats } from '../support/redis-stats';
import { createFleet, fleetEvents, someOf, type Fleet } from '../support/fleet';
import {
  commits,
  configureReceiver,
  cpuMeter,
  cpuText,
  loadMeter,
  memoryMeter,
  memoryText,
  ms,
  paced,
  pacedPhase,
  PACER_CONNECTIONS,
  perDelivery,
  printLoad,
  receiverStats,
  scriptsPerDelivery,
  switchText,
  waitCount,
  waitIdle,
  waitReceived,
  type Bench,
  type Load,
  type Memory,
  type Paced,
} from './bench';
import { retryPrecision, saturated, RETRY_TOLERANCE_MS, type RetryGaps, type RetryTenant, type Saturated } from './real-receivers';
import { endToEnd, type EndToEnd } from './end-to-end';
import {
  CONCURRENCY,
  DB_NAME,
  E2E_BATCH,
  E2E_RATE,
  EVENTS,
  FLEET_COMPANIES,
  FLEET_PACED_LATENCY_MS,
  FLEET_PACED_RATE,
  FLEET_PORT,
  FLEET_RAMP_SECONDS,
  FLEET_SECONDS,
  FLEET_WEBHOOKS_PER_COMPANY,
  HANG_LATENCY_MS,
  HANG_PERCENT,
  HANG_RAMP_SECONDS,
  LATENCIES,
  METRICS_PORT,
  NOOP_CONCURRENCY,
  PACED_LEAD_SECONDS,
  PACED_RATES,
  PACED_SECONDS,
  PG_BASE,
  PREFIX,
  RECEIVER_PORT,
  REDIS_URL,
  REF_CPU_200,
  REF_RATIO_200,
  RETRY_WEBHOOKS,
  ROOT,
  runs,
  SCALE,
  WARMUP_EVENTS,
  WEBHOOKS,
} from './settings';

const NOOP_QUEUE = 'bench-noop';
const NOOP_PACED_QUEUE = 'bench-noop-paced';
/** The 0 ms saturation as a share of the no-op worker in issue 30's outside probe: its figure is to be kept at least. */
const PROBE_NOOP_RATIO = 0.138;

async function recordedSuccesses(check: pg.Client): Promise<number> {
  const r = await check.query<{ n: string }>(`select count(*) n from entregas where estado = 'exitosa'`);
  return Number(r.rows[0]!.n);
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
    NOOP_CONCURRENCY: String(NOOP_CONCURRENCY),
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
    NOOP_CONCURRENCY: String(NOOP_CONCURRENCY),
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
  /** Of the no-op worker's rate. */
  ratio: number;
  load: Load;
  memory: Memory;
}

/** The events queued while the queue is paused (workers take nothing from it), then timed from resume until every delivery is recorded. */
async function saturationPhase(b: Bench, baselineRate: number): Promise<Saturation> {
  const deliveries = EVENTS * WEBHOOKS;
  await b.eventsQueue.pause();
  const addsBefore = await redisCommandStats(b.redis);
  const queueStarted = now();
  await addEvents(b.eventsQueue, Array.from({ length: EVENTS }, () => eventJob(b.empresaId, b.nextEvent++, new Date().toISOString(), b.webhooksVersion)), b.pool);
  const queuedIn = (now() - queueStarted) / 1000;
  const adds = commandDelta(addsBefore, await redisCommandStats(b.redis));
  const receivedBefore = await receiverStats(b);
  const commitsBefore = await commits(b.check);
  const memory = await memoryMeter(b, { dispatcher: b.dispatcher?.pid });
  const meter = await loadMeter(b);
  const started = now();
  await b.eventsQueue.resume();
  await waitReceived(b, receivedBefore.requests + deliveries, 300_000);
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
  const mem = await memory();
  console.log(`    ${memoryText(mem)}`);
  return { rate, ratio: rate / baselineRate, load, memory: mem };
}

// ---- the report ---------------------------------------------------------------------------------

/** One row of the summary. */
interface Row {
  name: string;
  perSecond: number;
  load: Load;
  noopCpu?: number;
  memory?: Memory;
  latency: string;
  /** The machine's 1-minute load average when the phase ended. */
  loadAvg: number;
}

function printSummary(rows: Row[]): void {
  const line = (r: Row): string =>
    `  ${r.name.padEnd(36)} ${String(Math.round(r.perSecond)).padStart(6)}  ` +
    `${['dispatcher', 'postgres', 'redis'].map((g) => perDelivery(r.load, g).toFixed(3)).join(' / ').padEnd(23)}  ` +
    `${(r.noopCpu === undefined ? '-' : (perDelivery(r.load, 'dispatcher') / r.noopCpu).toFixed(2)).padStart(7)}  ` +
    `${(r.load.redis.total / r.load.deliveries).toFixed(1).padStart(8)}  ${scriptsPerDelivery(r.load).toFixed(2).padStart(7)}  ` +
    `${r.load.switches.sleeps.toFixed(2).padStart(6)}  ${String(r.memory?.rss.dispatcher ?? '-').padStart(7)}  ${String(r.memory?.peakInFlight ?? '-').padStart(9)}  ` +
    `${r.loadAvg.toFixed(1).padStart(5)}  ${r.latency}`;
  console.log(
    `summary, per delivery:                 deliv/s  CPU ms dispatcher / postgres / redis  x no-op  Redis cmds  scripts  sleeps  RSS MB  in flight  load1  commit → receipt p50 / p99 / max ms`,
  );
  for (const r of rows) console.log(line(r));
  console.log(`  (x no-op: the dispatcher's CPU per delivery over the paced no-op worker's CPU per job at the same rate, measured right before;`);
  console.log(`   sleeps: voluntary context switches of the dispatcher's main thread; RSS: the dispatcher's peak over the phase;`);
  console.log(`   in flight: the most requests the receivers held at once; load1: the machine's 1-minute load average at the phase's end)`);
}

const verdict = (ok: boolean): string => (ok ? 'met' : 'MISSED');

function printIssue16Targets(saturation: Saturation, paced: Paced[]): void {
  const p99At = (rate: number, limit: number): string => {
    const p = paced.find((x) => x.rate === rate);
    return p?.p99 === undefined ? `p99 <= ${limit} ms at ${rate}/s: not measured` : `p99 <= ${limit} ms at ${rate}/s ${verdict(p.p99 <= limit)} (${ms(p.p99)})`;
  };
  const scripts = scriptsPerDelivery(saturation.load);
  const at200 = paced.find((x) => x.rate === 200);
  const cpu200 = at200 ? perDelivery(at200.load, 'dispatcher') : undefined;
  const ratio200 = at200 && cpu200 !== undefined && at200.noopCpu !== undefined ? cpu200 / at200.noopCpu : undefined;
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
      `>= 0.18 of the no-op worker ${verdict(saturation.ratio >= 0.18)} (${saturation.ratio.toFixed(3)}); ${p99At(200, 15)}; ${p99At(500, 40)}; ` +
      `<= 2 BullMQ scripts per delivery at saturation ${verdict(scripts <= 2)} (${scripts.toFixed(2)}); ${cpuPart}`,
  );
}

interface Results {
  saturation?: Saturation;
  latency: Saturated[];
  fleetPaced?: Paced;
  e2e?: EndToEnd;
  hang?: Saturated;
  retry?: RetryGaps;
  /** Every phase's memory, the dispatcher's and the gateway's peaks among them. */
  memories: Memory[];
}

/** Issue 30's "Done when", one line per target: what it asks, the figure, PASS or FAIL (or not measured). */
function printIssue30Targets(r: Results, build: string): void {
  const lines: Array<[string, string, boolean | undefined]> = [];
  const at = (latency: number): Saturated | undefined => r.latency.find((s) => s.latencyMs === latency);
  const zero = at(0);
  for (const [latency, least] of [
    [100, 0.9],
    [500, 0.8],
  ] as const) {
    const s = at(latency);
    lines.push([
      `deliveries/s to ${latency} ms receivers >= ${least} of those to 0 ms`,
      s && zero ? `${(s.rate / zero.rate).toFixed(3)} (${Math.round(s.rate)} / ${Math.round(zero.rate)})` : 'not measured',
      s && zero ? s.rate / zero.rate >= least : undefined,
    ]);
  }
  const healthy = r.hang ? at(r.hang.latencyMs) : undefined;
  lines.push([
    `${HANG_PERCENT}% of webhooks never answering: the others' deliveries/s >= 0.9 of all healthy (receivers at ${HANG_LATENCY_MS} ms)`,
    r.hang && healthy ? `${(r.hang.rate / healthy.rate).toFixed(3)} (${Math.round(r.hang.rate)} / ${Math.round(healthy.rate)})` : 'not measured',
    r.hang && healthy ? r.hang.rate / healthy.rate >= 0.9 : undefined,
  ]);
  const fp = r.fleetPaced;
  lines.push([
    `commit → receipt p99 at ${FLEET_PACED_RATE} events/s <= the receivers' latency (${FLEET_PACED_LATENCY_MS} ms) + 20 ms`,
    fp?.p99 !== undefined
      ? `p99 ${ms(fp.p99 + fp.latencyMs)} ms to the answer = latency + ${ms(fp.p99)} ms (committed at ${Math.round(fp.achieved)}/s)`
      : 'not measured',
    fp?.p99 !== undefined ? fp.p99 <= 20 : undefined,
  ]);
  const gaps = r.retry ? [...r.retry.first, ...r.retry.second].sort((x, y) => x - y) : [];
  const gapP99 = gaps.length ? gaps[Math.min(gaps.length - 1, Math.floor(0.99 * gaps.length))] : undefined;
  lines.push([
    `retry gaps within ${RETRY_TOLERANCE_MS} ms of 1 s and 2 s at p99 during saturation`,
    r.retry && gapP99 !== undefined
      ? `p99 |gap − expected| ${ms(gapP99)} ms over ${gaps.length} gaps (of ${r.retry.deliveries} deliveries, ${r.retry.seen} had their first attempt, ` +
        `${r.retry.complete} their third${r.retry.censored ? `; ${r.retry.censored} gaps past due and still open, counted as late as the wait` : ''})`
      : 'not measured',
    r.retry && gapP99 !== undefined ? gapP99 <= RETRY_TOLERANCE_MS && r.retry.complete === r.retry.deliveries : undefined,
  ]);
  const dispatcherRss = r.memories.map((m) => m.rss.dispatcher).filter((v): v is number => v !== undefined && Number.isFinite(v));
  const inFlight = Math.max(0, ...r.memories.map((m) => m.peakInFlight));
  const mb = dispatcherRss.length ? Math.max(...dispatcherRss) : undefined;
  lines.push([
    'dispatcher peak RSS <= 150 MB (every phase) with 1,000 sends in flight',
    mb === undefined ? 'not measured' : `${mb} MB at most; at most ${inFlight} sends in flight in any phase${inFlight < 1000 ? ' (1,000 never reached)' : ''}`,
    mb === undefined ? undefined : mb <= 150 && inFlight >= 1000,
  ]);
  const gateway = r.e2e?.memory.rss.gateway;
  lines.push([
    'gateway peak RSS <= 150 MB (end to end)',
    gateway === undefined ? 'not measured' : `${gateway} MB (${r.e2e!.memory.peakInFlight} sends in flight at most meanwhile)`,
    gateway === undefined ? undefined : gateway <= 150,
  ]);
  lines.push(['gateway peak RSS <= 120 MB under the read bench', 'measured by pnpm bench:gateway', undefined]);
  lines.push([
    `0 ms saturation (one webhook) at least ${PROBE_NOOP_RATIO} of the no-op worker`,
    r.saturation
      ? `${r.saturation.ratio.toFixed(3)} (${Math.round(r.saturation.rate)} deliveries/s)` +
        (zero ? `; the fleet at 0 ms: ${(zero.rate / (r.saturation.rate / r.saturation.ratio)).toFixed(3)} of it` : '')
      : 'not measured',
    r.saturation ? r.saturation.ratio >= PROBE_NOOP_RATIO : undefined,
  ]);
  const slow = at(100);
  lines.push([
    'dispatcher CPU per delivery at 100 ms receivers <= 1.2 x at 0 ms (the Build list)',
    slow && zero
      ? `${(perDelivery(slow.load, 'dispatcher') / perDelivery(zero.load, 'dispatcher')).toFixed(2)} x (${perDelivery(slow.load, 'dispatcher').toFixed(3)} / ${perDelivery(zero.load, 'dispatcher').toFixed(3)} ms, at saturation)`
      : 'not measured',
    slow && zero ? perDelivery(slow.load, 'dispatcher') / perDelivery(zero.load, 'dispatcher') <= 1.2 : undefined,
  ]);
  const conditions: string[] = [];
  if (build !== 'dist') conditions.push('the source build (BENCH_BUILD=src)');
  if (CONCURRENCY !== undefined) conditions.push(`DISPATCHER_CONCURRENCY=${CONCURRENCY}`);
  if (SCALE !== 1) conditions.push(`BENCH_SCALE=${SCALE}`);
  console.log(
    `targets (issue 30, "Done when"): ${conditions.length ? `NOT the issue's conditions (${conditions.join(', ')})` : 'compiled build, default settings'}`,
  );
  const width = Math.max(...lines.map(([what]) => what.length));
  for (const [what, figure, ok] of lines) console.log(`  ${what.padEnd(width)}  ${(ok === undefined ? '-' : ok ? 'PASS' : 'FAIL').padEnd(4)}  ${figure}`);
  const judged = lines.filter(([, , ok]) => ok !== undefined);
  console.log(`  ${judged.filter(([, , ok]) => ok).length} of ${judged.length} measured targets met`);
}

// ---- the run -------------------------------------------------------------------------------------

const load1 = (): number => loadavg()[0]!;
const loadText = (): string => loadavg().map((l) => l.toFixed(2)).join(' ');

async function main(): Promise<void> {
  const runStarted = now();
  execFileSync(process.execPath, ['scripts/test-certs.mjs'], { cwd: ROOT, stdio: 'inherit' });
  const build = prepareBuild(ROOT);
  const fleetPhases = runs('latency') || runs('fleet-paced') || runs('e2e') || runs('hang') || runs('retry');
  console.log(
    `bench:dispatcher (${build} build, DISPATCHER_CONCURRENCY ${CONCURRENCY ?? 'default'}${SCALE !== 1 ? `, BENCH_SCALE ${SCALE}` : ''}): ` +
      `${EVENTS} events x ${WEBHOOKS} webhook(s), paced ${PACED_RATES.join(', ')} events/s for ${PACED_SECONDS} s each (after ${PACED_LEAD_SECONDS} s at the rate, not measured); ` +
      `fleet of ${FLEET_COMPANIES} companies x ${FLEET_WEBHOOKS_PER_COMPANY} webhooks at ${LATENCIES.join(', ')} ms (${FLEET_RAMP_SECONDS} s + ${FLEET_SECONDS} s each); ` +
      `load average before: ${loadText()}`,
  );
  const databaseUrl = await freshDatabase(PG_BASE, DB_NAME);
  const check = new pg.Client({ connectionString: databaseUrl });
  await check.connect();
  const pool = new pg.Pool({ connectionString: databaseUrl, max: PACER_CONNECTIONS, idleTimeoutMillis: 0 });
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const eventsQueue = queueFor(JOBS.shipmentEvent, { connection: redis, prefix: PREFIX });
  const deliveryQueue = queueFor(JOBS.delivery, { connection: redis, prefix: PREFIX });
  // The machine's load through the run, sampled (it is shared: other work weighs on every figure).
  const loads: number[] = [];
  const sampler = setInterval(() => loads.push(load1()), 5000);

  const receiver = child('receiver', 'bench/dispatcher/receiver.ts', {
    RECEIVER_PORT: String(RECEIVER_PORT),
    ...(fleetPhases ? { RECEIVER_EXTRA_PORTS: `${FLEET_PORT}-${FLEET_PORT + FLEET_COMPANIES - 1}` } : {}),
  }, true);
  const b: Bench = {
    build,
    databaseUrl,
    check,
    pool,
    redis,
    eventsQueue,
    deliveryQueue,
    receiver,
    dispatcher: undefined,
    empresaId: '',
    webhooksVersion: undefined,
    cpuGroups: {},
    delivered: 0,
    nextEvent: 0,
  };
  try {
    await ask(receiver, {}, 'listening');
    const { empresaId, webhookIds, webhooksVersion } = await benchWebhooks(check, { nombre: 'Bench', receiverPort: RECEIVER_PORT, count: WEBHOOKS });
    b.empresaId = empresaId;
    b.webhooksVersion = webhooksVersion;
    let fleet: Fleet | undefined;
    if (fleetPhases) {
      fleet = await createFleet(check, { companies: FLEET_COMPANIES, perCompany: FLEET_WEBHOOKS_PER_COMPANY, portBase: FLEET_PORT });
      console.log(`  fleet: ${fleet.companies} companies, ${fleet.webhooks.length} webhooks (one per branch), on ports ${FLEET_PORT}-${FLEET_PORT + FLEET_COMPANIES - 1}`);
    }
    const retryTenants: RetryTenant[] = [];
    if (runs('retry')) {
      for (let i = 0; i < RETRY_WEBHOOKS; i++) {
        const t = await benchWebhooks(check, { nombre: `Failing ${i}`, receiverPort: RECEIVER_PORT, path: `/fail/${i}` });
        retryTenants.push({ empresaId: t.empresaId, webhooksVersion: t.webhooksVersion });
      }
    }

    const baselineRate = runs('saturation') ? await baseline(b, webhookIds[0]!) : undefined;

    // Warm-up: JIT, connection pools, the TLS connections (and the pacer's connections).
    await addEvents(eventsQueue, Array.from({ length: WARMUP_EVENTS }, () => eventJob(empresaId, b.nextEvent++, new Date().toISOString(), webhooksVersion)), pool);
    // BENCH_DISPATCHER_NODE_ARGS: e.g. '--cpu-prof --cpu-prof-dir=/tmp/prof' to profile the dispatcher.
    b.dispatcher = spawned('dispatcher', serviceArgs('dispatcher', build, process.env.BENCH_DISPATCHER_NODE_ARGS?.split(' ').filter(Boolean)), {
      DATABASE_URL: databaseUrl,
      REDIS_URL,
      REDIS_PREFIX: PREFIX,
      DISPATCHER_METRICS_PORT: String(METRICS_PORT),
      ...(CONCURRENCY !== undefined ? { DISPATCHER_CONCURRENCY: String(CONCURRENCY) } : {}),
      DISPATCH_HOST_MAP: 'receiver.test=127.0.0.1',
      DISPATCH_ALLOW_CIDRS: '127.0.0.0/8',
      NODE_EXTRA_CA_CERTS: join(ROOT, '.test-certs', 'ca.pem'),
      LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'info',
    });
    b.cpuGroups = { dispatcher: b.dispatcher.pid!, receiver: receiver.pid!, postgres: /^postgres$/, redis: /^redis-server$/ };
    b.delivered = WARMUP_EVENTS * WEBHOOKS;
    await Promise.all(Array.from({ length: PACER_CONNECTIONS }, () => pool.query('select 1')));
    await waitDelivered(METRICS_PORT, b.delivered, 120_000);
    console.log(`  warm-up: ${b.delivered} deliveries recorded`);

    const rows: Row[] = [];
    const results: Results = { latency: [], memories: [] };
    if (runs('saturation') && baselineRate !== undefined) {
      results.saturation = await saturationPhase(b, baselineRate);
      results.memories.push(results.saturation.memory);
      rows.push({ name: 'saturation (1 webhook, 0 ms)', perSecond: results.saturation.rate, load: results.saturation.load, memory: results.saturation.memory, latency: '-', loadAvg: load1() });
    }
    b.nextEvent = 10_000_000;
    const pacedResults: Paced[] = [];
    if (runs('paced') && PACED_RATES.length > 0) {
      const noop = await startPacedNoop(b, webhookIds[0]!);
      try {
        for (const rate of PACED_RATES) {
          const noopCpu = await pacedNoopPhase(b, noop, webhookIds[0]!, rate);
          const p = await pacedPhase(b, rate, noopCpu, {
            label: `paced ${rate}/s`,
            makeJob: () => eventJob(b.empresaId, b.nextEvent++, ''),
            perEvent: WEBHOOKS,
            latencyMs: 0,
          });
          pacedResults.push(p);
          results.memories.push(p.memory);
          rows.push({ name: p.label, perSecond: rate * WEBHOOKS, load: p.load, noopCpu, memory: p.memory, latency: `${ms(p.p50)} / ${ms(p.p99)} / ${ms(p.max)}`, loadAvg: load1() });
        }
      } finally {
        await stopPacedNoop(noop);
      }
    }

    if (fleet) {
      const numbering = { next: 30_000_000 };
      const next = fleetEvents(fleet, FLEET_WEBHOOKS_PER_COMPANY, numbering);
      // The fleet's own warm-up: two events per webhook, so every origin has its connections and every company's routes are held.
      await configureReceiver(b, 0);
      await addEvents(eventsQueue, Array.from({ length: 2 * fleet.webhooks.length }, () => next()), pool);
      await waitIdle(b, 120_000);
      const saturatedRow = (s: Saturated): Row => ({ name: s.label, perSecond: s.rate, load: s.load, memory: s.memory, latency: '-', loadAvg: load1() });
      if (runs('latency')) {
        for (const latencyMs of LATENCIES) {
          const s = await saturated(b, next, { label: `fleet at ${latencyMs} ms`, latencyMs, hang: [], rampSeconds: FLEET_RAMP_SECONDS, windowSeconds: FLEET_SECONDS });
          results.latency.push(s);
          results.memories.push(s.memory);
          rows.push(saturatedRow(s));
        }
      }
      if (runs('fleet-paced')) {
        await configureReceiver(b, FLEET_PACED_LATENCY_MS);
        const makeJob = fleetEvents(fleet, FLEET_WEBHOOKS_PER_COMPANY, numbering);
        const p = await pacedPhase(b, FLEET_PACED_RATE, undefined, {
          label: `fleet paced ${FLEET_PACED_RATE}/s at ${FLEET_PACED_LATENCY_MS} ms`,
          makeJob: () => makeJob(''),
          perEvent: 1,
          latencyMs: FLEET_PACED_LATENCY_MS,
        });
        await configureReceiver(b, 0);
        await waitIdle(b, 300_000);
        results.fleetPaced = p;
        results.memories.push(p.memory);
        rows.push({ name: p.label, perSecond: FLEET_PACED_RATE, load: p.load, memory: p.memory, latency: `${ms(p.p50)} / ${ms(p.p99)} / ${ms(p.max)}`, loadAvg: load1() });
      }
      if (runs('e2e')) {
        const e = await endToEnd(b, fleet);
        await configureReceiver(b, 0);
        await waitIdle(b, 300_000);
        results.e2e = e;
        results.memories.push(e.memory);
        const pick = (xs: number[], p: number): string => ms(xs[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]);
        rows.push({
          name: `end to end ${E2E_RATE}/s (batches of ${E2E_BATCH})`,
          perSecond: e.achieved,
          load: e.load,
          memory: e.memory,
          latency: `${pick(e.sentToReceipt, 50)} / ${pick(e.sentToReceipt, 99)} / ${ms(e.sentToReceipt[e.sentToReceipt.length - 1])} (request sent → receipt)`,
          loadAvg: load1(),
        });
      }
      if (runs('hang') || runs('retry')) {
        const hanging = someOf(fleet, HANG_PERCENT);
        const s = await saturated(
          b,
          next,
          { label: `fleet at ${HANG_LATENCY_MS} ms, ${HANG_PERCENT}% never answering`, latencyMs: HANG_LATENCY_MS, hang: hanging, rampSeconds: HANG_RAMP_SECONDS, windowSeconds: FLEET_SECONDS },
          runs('retry')
            ? async () => {
                results.retry = await retryPrecision(b, retryTenants);
              }
            : undefined,
        );
        if (runs('hang')) {
          results.hang = s;
          results.memories.push(s.memory);
          rows.push(saturatedRow(s));
        }
        if (results.retry) {
          results.memories.push(results.retry.memory);
          rows.push({ name: 'retry precision (saturated)', perSecond: results.retry.rate, load: results.retry.load, memory: results.retry.memory, latency: '-', loadAvg: load1() });
        }
      }
    }

    const totals = await receiverStats(b);
    const counts = await check.query<{ estado: string; n: string }>(`select estado, count(*) n from entregas group by estado order by estado`);
    console.log(`  TLS: ${totals.handshakes} connections opened (${totals.resumed} resumed sessions) for ${totals.requests} requests in the whole run`);
    console.log(`  deliveries by state: ${counts.rows.map((r) => `${r.estado} ${r.n}`).join(', ')}`);
    const sampled = loads.length ? `${Math.min(...loads).toFixed(2)} to ${Math.max(...loads).toFixed(2)}, mean ${(loads.reduce((s, l) => s + l, 0) / loads.length).toFixed(2)}` : '-';
    console.log(`  load average after: ${loadText()}; 1-minute load average sampled every 5 s during the run: ${sampled}`);
    console.log(`  the run took ${((now() - runStarted) / 60_000).toFixed(1)} min`);
    printSummary(rows);
    if (results.saturation && pacedResults.length) printIssue16Targets(results.saturation, pacedResults);
    printIssue30Targets(results, build);
  } finally {
    clearInterval(sampler);
    if (b.dispatcher) await stopChild(b.dispatcher);
    await endRun({ receiver, queues: [eventsQueue, deliveryQueue], redis, prefix: PREFIX });
    await pool.end();
    await check.end();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
