// `pnpm bench:dispatcher`: one script, real Postgres and Redis, everything on loopback.
//  1. baseline: a no-op BullMQ worker (child process) empties a queue of N jobs;
//  2. throughput: the real dispatcher (child process, services/dispatcher/src/main.ts) fans out N
//     events queued beforehand and delivers each, signed, over HTTPS to a keep-alive receiver
//     (child process) that answers 200 at once; timed until every delivery is recorded `exitosa`;
//  3. latency: events committed (outbox row, then queued, as the gateway's relay does) at a paced
//     200 per second; commit → receipt at the receiver, p50 and p99.
// Method and figures: bench/README.md (dispatcher section).
import { execFileSync, fork, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { bulkJobs, JOBS, queueFor, type ShipmentEventJob } from '@svc/schema';
import { cpuSnapshot } from '../support/cpu';
import { freshDatabase, peakRssMb, stopChild } from '../support/bench-process';
import { deletePrefix } from '../../test/support/redis-prefix';

const ROOT = join(__dirname, '..', '..');
const PG_BASE = (process.env.BENCH_DATABASE_BASE ?? 'postgres://postgres@127.0.0.1:5432').replace(/\/$/, '');
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const DB_NAME = 'svc_bench_dispatcher';
const PREFIX = `svcbench:disp:${randomBytes(4).toString('hex')}`;
const EVENTS = Number(process.env.BENCH_EVENTS ?? 20_000);
const WARMUP_EVENTS = Number(process.env.BENCH_WARMUP_EVENTS ?? 3000);
const WEBHOOKS = Number(process.env.BENCH_WEBHOOKS ?? 1);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 100);
const PACED_RATE = Number(process.env.BENCH_PACED_RATE ?? 200);
const PACED_SECONDS = Number(process.env.BENCH_PACED_SECONDS ?? 15);
const RECEIVER_PORT = Number(process.env.BENCH_RECEIVER_PORT ?? 3943);
const METRICS_PORT = Number(process.env.BENCH_METRICS_PORT ?? 3944);
const NOOP_QUEUE = 'bench-noop';

const now = (): number => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---- child processes ------------------------------------------------------------------------------

function child(name: string, script: string, env: Record<string, string>, ipc: boolean, nodeArgs: string[] = []): ChildProcess {
  const options = { cwd: ROOT, env: { ...process.env, ...env }, execArgv: [...nodeArgs, '--import', 'tsx'] };
  const c = ipc
    ? fork(script, [], { ...options, stdio: ['ignore', 'ignore', 'pipe', 'ipc'] })
    : spawn(process.execPath, [...nodeArgs, '--import', 'tsx', script], { ...options, stdio: ['ignore', 'ignore', 'pipe'] });
  c.stderr?.on('data', (b: Buffer) => process.stderr.write(`[${name}] ${b.toString()}`));
  return c;
}

function ask<T>(c: ChildProcess, msg: object, key: string): Promise<T> {
  return new Promise((resolve) => {
    const on = (m: Record<string, unknown>): void => {
      if (key in m) {
        c.off('message', on);
        resolve(m as T);
      }
    };
    c.on('message', on);
    if (Object.keys(msg).length) c.send(msg);
  });
}

/** CPU use of each group since the meter started: % of one core, and CPU ms per unit of work if given. */
function cpuMeter(groups: Record<string, number | RegExp>): (units?: number) => string {
  const started = now();
  const before = cpuSnapshot(groups);
  return (units) => {
    const seconds = (now() - started) / 1000;
    const after = cpuSnapshot(groups);
    let total = 0;
    const parts = Object.keys(groups).map((k) => {
      const used = Math.max(0, after[k]! - before[k]!);
      total += used;
      const per = units ? ` (${((used * 1000) / units).toFixed(3)} ms/delivery)` : '';
      return `${k} ${Math.round((used / seconds) * 100)}%${per}`;
    });
    return parts.join(', ') + (units ? `; total ${((total * 1000) / units).toFixed(3)} CPU ms per delivery` : '');
  };
}

// ---- events -----------------------------------------------------------------------------------

function eventJob(empresaId: string, i: number, committedAt: string): ShipmentEventJob {
  return {
    eventId: randomUUID(),
    evento: 'GUIA_CREADA',
    empresaId,
    sucursalId: null,
    data: { numeroGuia: `SVCBENCH${String(i).padStart(8, '0')}`, estado: 'CREADA' },
    committedAt,
    requestId: randomUUID(),
  };
}

async function addEvents(queue: Queue<ShipmentEventJob>, jobs: ShipmentEventJob[]): Promise<void> {
  for (let i = 0; i < jobs.length; i += 1000) {
    await queue.addBulk(bulkJobs(JOBS.shipmentEvent, jobs.slice(i, i + 1000)));
  }
}

/**
 * Waits until the dispatcher has counted `expected` finished deliveries (its counter moves only
 * after a delivery's record has committed), reading its /metrics rather than polling Postgres, so
 * the wait adds no load to what is measured. The caller checks the database afterwards.
 */
async function waitDelivered(metricsPort: number, expected: number, timeoutMs: number, pollMs = 100): Promise<number> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    let n = 0;
    try {
      const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
      for (const m of text.matchAll(/^svc_webhook_deliveries_total\{[^}]*\} (\d+)/gm)) n += Number(m[1]);
    } catch {}
    if (n >= expected) return now();
    if (Date.now() > until) throw new Error(`only ${n} of ${expected} deliveries finished`);
    await sleep(pollMs);
  }
}

/** Waits until the receiver has had `expected` requests in all (asked over IPC: no load on the measured side). */
async function waitReceived(receiver: ChildProcess, expected: number, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const { requests } = await ask<{ requests: number }>(receiver, { cmd: 'stats' }, 'requests');
    if (requests >= expected) return;
    if (Date.now() > until) throw new Error(`the receiver got ${requests} of ${expected} requests`);
    await sleep(20);
  }
}

async function recordedSuccesses(check: pg.Client): Promise<number> {
  const r = await check.query<{ n: string }>(`select count(*) n from entregas where estado = 'exitosa'`);
  return Number(r.rows[0]!.n);
}

/** Commands Redis has executed so far (all clients): the difference over a phase is its load. */
async function redisCalls(redis: Redis): Promise<number> {
  const info = await redis.info('stats');
  return Number(/total_commands_processed:(\d+)/.exec(info)?.[1] ?? 0);
}

const pct = (sorted: number[], p: number): number => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;

async function main(): Promise<void> {
  execFileSync(process.execPath, ['scripts/test-certs.mjs'], { cwd: ROOT, stdio: 'inherit' });
  console.log(
    `bench:dispatcher: ${EVENTS} events x ${WEBHOOKS} webhook(s), concurrency ${CONCURRENCY}, paced ${PACED_RATE}/s for ${PACED_SECONDS} s; ` +
      `load average before: ${loadavg().map((l) => l.toFixed(2)).join(' ')}`,
  );
  const databaseUrl = await freshDatabase(PG_BASE, DB_NAME);
  const check = new pg.Client({ connectionString: databaseUrl });
  await check.connect();
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const eventsQueue = queueFor(JOBS.shipmentEvent, { connection: redis, prefix: PREFIX });
  const noopQueue = new Queue(NOOP_QUEUE, { connection: redis, prefix: PREFIX });

  const receiver = child('receiver', 'bench/dispatcher/receiver.ts', { RECEIVER_PORT: String(RECEIVER_PORT) }, true);
  let dispatcher: ChildProcess | undefined;
  try {
    await ask(receiver, {}, 'listening');
    const empresa = await check.query<{ id: string }>(`insert into empresas (nombre, verificada) values ('Bench', true) returning id`);
    const empresaId = empresa.rows[0]!.id;
    const webhookIds: string[] = [];
    for (let i = 0; i < WEBHOOKS; i++) {
      const w = await check.query<{ id: string }>(
        `insert into webhooks (empresa_id, url, secret, eventos) values ($1, $2, $3, '{}') returning id`,
        [empresaId, `https://receiver.test:${RECEIVER_PORT}/hook/${i}`, `whsec_${randomBytes(32).toString('base64url')}`],
      );
      webhookIds.push(w.rows[0]!.id);
    }

    // 1. Baseline: a no-op worker over the same number of jobs as there will be deliveries.
    const baselineJobs = EVENTS * WEBHOOKS;
    const payload = eventJob(empresaId, 0, new Date().toISOString());
    for (let i = 0; i < baselineJobs; i += 1000) {
      await noopQueue.addBulk(
        Array.from({ length: Math.min(1000, baselineJobs - i) }, () => ({
          name: 'noop',
          data: { ...payload, deliveryId: randomUUID(), webhookId: webhookIds[0] },
          opts: { removeOnComplete: JOBS.delivery.options.removeOnComplete },
        })),
      );
    }
    const noop = child('noop-worker', 'bench/dispatcher/noop-worker.ts', {
      REDIS_URL,
      REDIS_PREFIX: PREFIX,
      NOOP_QUEUE,
      NOOP_JOBS: String(baselineJobs),
      NOOP_CONCURRENCY: String(CONCURRENCY),
    }, true);
    const baseCpu = cpuMeter({ worker: noop.pid!, redis: /^redis-server$/ });
    const base = await ask<{ jobs: number; seconds: number }>(noop, {}, 'jobs');
    const baseCpuText = baseCpu();
    await stopChild(noop);
    const baselineRate = base.jobs / base.seconds;
    console.log(
      `  baseline no-op BullMQ worker: ${base.jobs} jobs in ${base.seconds.toFixed(2)} s = ${Math.round(baselineRate)} jobs/s; ` +
        `CPU (% of one core, start-up included): ${baseCpuText}`,
    );

    // 2. Throughput: events queued beforehand, then the dispatcher starts on them.
    await addEvents(eventsQueue, Array.from({ length: WARMUP_EVENTS }, (_, i) => eventJob(empresaId, i, new Date().toISOString())));
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
    const warmExpected = WARMUP_EVENTS * WEBHOOKS;
    await waitDelivered(METRICS_PORT, warmExpected, 120_000);
    console.log(`  warm-up: ${warmExpected} deliveries recorded`);

    // The events are queued while the queue is paused (workers take nothing from a paused queue),
    // as the baseline's jobs are: the timed run is the dispatcher's work alone.
    await eventsQueue.pause();
    const queueStarted = now();
    await addEvents(eventsQueue, Array.from({ length: EVENTS }, (_, i) => eventJob(empresaId, WARMUP_EVENTS + i, new Date().toISOString())));
    const queuedIn = (now() - queueStarted) / 1000;
    const cpu = cpuMeter({ dispatcher: dispatcher.pid!, receiver: receiver.pid!, postgres: /^postgres$/, redis: /^redis-server$/ });
    const statsBefore = await ask<{ requests: number; handshakes: number }>(receiver, { cmd: 'stats' }, 'requests');
    const xacts = async (): Promise<number> =>
      Number((await check.query<{ n: string }>(`select xact_commit n from pg_stat_database where datname = $1`, [DB_NAME])).rows[0]!.n);
    const xactsBefore = await xacts();
    const redisCallsBefore = await redisCalls(redis);
    const started = now();
    await eventsQueue.resume();
    await waitReceived(receiver, statsBefore.requests + EVENTS * WEBHOOKS, 300_000);
    const ended = await waitDelivered(METRICS_PORT, warmExpected + EVENTS * WEBHOOKS, 60_000, 5);
    const seconds = (ended - started) / 1000;
    const cpuText = cpu(EVENTS * WEBHOOKS);
    const commits = (await xacts()) - xactsBefore;
    const calls = (await redisCalls(redis)) - redisCallsBefore;
    const recorded = await recordedSuccesses(check);
    if (recorded !== warmExpected + EVENTS * WEBHOOKS) throw new Error(`${recorded} deliveries recorded, expected ${warmExpected + EVENTS * WEBHOOKS}`);
    const statsAfter = await ask<{ requests: number; handshakes: number }>(receiver, { cmd: 'stats' }, 'requests');
    const rate = (EVENTS * WEBHOOKS) / seconds;
    console.log(
      `  dispatcher: ${EVENTS * WEBHOOKS} deliveries recorded in ${seconds.toFixed(2)} s = ${Math.round(rate)} deliveries/s ` +
        `(${((rate / baselineRate) * 100).toFixed(1)}% of the baseline; events queued beforehand in ${queuedIn.toFixed(2)} s); ` +
        `receiver got ${statsAfter.requests - statsBefore.requests} requests over ${statsAfter.handshakes - statsBefore.handshakes} new TLS connections`,
    );
    console.log(`  CPU (% of one core) during the run: ${cpuText}`);
    console.log(
      `  every delivery recorded exitosa in Postgres (${recorded}); per delivery: ${(commits / (EVENTS * WEBHOOKS)).toFixed(3)} Postgres commits, ` +
        `${(calls / (EVENTS * WEBHOOKS)).toFixed(1)} Redis commands (inside scripts included; other clients of this Redis too)`,
    );

    // 3. Latency at a paced rate: commit (an outbox row, as the gateway writes), then queue.
    await ask(receiver, { cmd: 'record' }, 'ok');
    const committed = new Map<string, number>();
    const pacedEvents = PACED_RATE * PACED_SECONDS;
    const t0 = now();
    for (let i = 0; i < pacedEvents; i++) {
      const due = t0 + (i * 1000) / PACED_RATE;
      const wait = due - now();
      if (wait > 1) await sleep(wait);
      const job = eventJob(empresaId, 10_000_000 + i, '');
      await check.query('begin');
      await check.query(
        `insert into outbox (id, empresa_id, sucursal_id, evento, data, request_id) values ($1, $2, null, $3, $4, $5)`,
        [job.eventId, empresaId, job.evento, JSON.stringify(job.data), job.requestId],
      );
      const commitAt = now();
      await check.query('commit');
      job.committedAt = new Date(commitAt).toISOString();
      committed.set(job.eventId, commitAt);
      await eventsQueue.addBulk(bulkJobs(JOBS.shipmentEvent, [job]));
    }
    const pacedFor = (now() - t0) / 1000;
    await waitDelivered(METRICS_PORT, warmExpected + EVENTS * WEBHOOKS + pacedEvents * WEBHOOKS, 60_000);
    const { receipts } = await ask<{ receipts: Array<[string, number]> }>(receiver, { cmd: 'receipts' }, 'receipts');
    // A receipt names its delivery (X-Request-Id); the delivery's row names its event.
    const eventOf = new Map(
      (await check.query<{ id: string; evento_id: string }>(`select id, evento_id from entregas where evento_id = any($1::uuid[])`, [[...committed.keys()]])).rows.map(
        (r) => [r.id, r.evento_id],
      ),
    );
    const latencies = receipts
      .filter(([id]) => committed.has(eventOf.get(id) ?? ''))
      .map(([id, at]) => at - committed.get(eventOf.get(id)!)!)
      .sort((a, b) => a - b);
    console.log(
      `  paced: ${pacedEvents} events in ${pacedFor.toFixed(1)} s (${(pacedEvents / pacedFor).toFixed(0)}/s), ${latencies.length} receipts; ` +
        `commit → receipt p50 ${pct(latencies, 50).toFixed(1)} ms, p99 ${pct(latencies, 99).toFixed(1)} ms, max ${latencies[latencies.length - 1]!.toFixed(1)} ms`,
    );

    const rss = peakRssMb(dispatcher.pid!);
    const totals = await ask<{ requests: number; handshakes: number; resumed: number }>(receiver, { cmd: 'stats' }, 'requests');
    const counts = await check.query<{ estado: string; n: string }>(`select estado, count(*) n from entregas group by estado order by estado`);
    console.log(`  dispatcher peak RSS (VmHWM): ${rss} MB`);
    console.log(
      `  TLS: ${totals.handshakes} connections opened (${totals.resumed} resumed sessions) for ${totals.requests} deliveries in the whole run`,
    );
    console.log(`  deliveries by state: ${counts.rows.map((r) => `${r.estado} ${r.n}`).join(', ')}`);
    console.log(`  load average after: ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
    const p99 = pct(latencies, 99);
    console.log(
      `targets: >= 2000 deliveries/s ${rate >= 2000 ? 'met' : 'MISSED'}; >= 12% of the baseline ${rate >= 0.12 * baselineRate ? 'met' : 'MISSED'}; ` +
        `p99 < 100 ms at ${PACED_RATE}/s ${p99 < 100 ? 'met' : 'MISSED'}; TLS reused ${totals.handshakes < totals.requests / 100 ? 'yes' : 'NO'}`,
    );
  } finally {
    if (dispatcher) await stopChild(dispatcher);
    receiver.send({ cmd: 'exit' });
    await stopChild(receiver);
    await eventsQueue.close();
    await noopQueue.close();
    await deletePrefix(redis, PREFIX);
    redis.disconnect();
    await check.end();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
