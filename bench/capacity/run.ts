// `pnpm bench:capacity`: what a second gateway and a second dispatcher add, in one run on one
// machine, real Postgres and Redis, every service a child process, and the reconciler's cost.
//  1. 1 gateway + 1 dispatcher, then 2 + 2, then 1 + 1 again (BENCH_PLAN, default "1,2,1": the
//     last bracket shows the machine's drift); in each:
//     - reads: authenticated GET /api/v1/empresa, BENCH_CONNECTIONS (50) connections split over the
//       running gateways (one autocannon per gateway, as a round-robin load balancer would), each
//       request with the next of the read tokens;
//     - creations: POST /api/v1/guias the same way, each request with the next of 10 companies' tokens;
//     - deliveries: BENCH_EVENTS events queued while the queue is paused, then timed until the
//       running dispatchers' counters (summed) have them all, over HTTPS to one keep-alive receiver;
//     with the CPU of each process (from /proc) and of Postgres and Redis.
//  2. The reconciler: every service stopped, BENCH_RECONCILE_ROWS (10,000) overdue pending
//     deliveries whose jobs Redis does not hold are written with SQL; one runOnce() of the
//     dispatcher's own reconciler (createReconciler, batch 500) queues them again, timed; then
//     BENCH_IDLE_PASSES passes with nothing to do (the cost of each RECONCILE_INTERVAL_MS).
// The gateways run with RATE_LIMIT_PER_MINUTE=10000000 as in bench:gateway: the rate-limit script
// still runs on every request, only the 100/min contract would make most answers 429.
// Method and figures: bench/README.md (capacity section).
import { execFileSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import pg from 'pg';
import { Redis } from 'ioredis';
import type { Queue } from 'bullmq';
import { createDb, createPool, queueFor } from '@svc/platform';
import { JOBS, type DeliveryJob, type ShipmentEventJob } from '@svc/contracts';
import { createLogger } from '@svc/observability';
import { createReconciler } from '../../services/dispatcher/src/reconcile/reconciler';
import { cpuByPid, cpuSinceByPid, cpuSnapshot } from '../support/cpu';
import { endRun, freshDatabase, stopChild } from '../support/bench-process';
import { addEvents, ask, benchWebhooks, child, deliveredCount, eventJob, now, sleep, waitDelivered } from '../support/dispatcher-bench';
import { company, rotating, SHIPMENT_BODY, startService, waitFor, waitForQuiet } from '../support/gateway-bench';

const ROOT = join(__dirname, '..', '..');
const PG_BASE = (process.env.BENCH_DATABASE_BASE ?? 'postgres://postgres@127.0.0.1:5432').replace(/\/$/, '');
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const DB_NAME = 'svc_bench_capacity';
const PREFIX = `svcbench:cap:${randomBytes(4).toString('hex')}`;
const ADMIN = `bench-admin-${randomBytes(12).toString('hex')}`;
const PLAN = (process.env.BENCH_PLAN ?? '1,2,1').split(',').map((n) => Math.min(2, Math.max(1, Number(n))));
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const DURATION = Number(process.env.BENCH_DURATION ?? 10);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 3);
const EVENTS = Number(process.env.BENCH_EVENTS ?? 20_000);
const CONCURRENCY = process.env.BENCH_CONCURRENCY; // unset: the DISPATCHER_CONCURRENCY default (50)
const READ_COMPANIES = Number(process.env.BENCH_READ_COMPANIES ?? 250); // two tokens each
const CREATORS = 10;
const RECONCILE_ROWS = Number(process.env.BENCH_RECONCILE_ROWS ?? 10_000);
const IDLE_PASSES = Number(process.env.BENCH_IDLE_PASSES ?? 50);
const BASE_PORT = Number(process.env.BENCH_BASE_PORT ?? 3961);
const gatewayPort = (i: number): number => BASE_PORT + 2 * i; // 3961, 3963
const gatewayMetricsPort = (i: number): number => BASE_PORT + 2 * i + 1; // 3962, 3964
const dispatcherMetricsPort = (i: number): number => BASE_PORT + 10 + i; // 3971, 3972
const RECEIVER_PORT = BASE_PORT + 14; // 3975

const avg = (): string => loadavg().map((l) => l.toFixed(2)).join(' ');

/** CPU of each group over a phase, in % of one core; `others` is what the rest of the machine took. */
function cpuMeter(groups: Record<string, number | RegExp>): () => Record<string, number> {
  const started = now();
  const named = Object.entries(groups).filter((e): e is [string, RegExp] => e[1] instanceof RegExp);
  const byPid = new Map(named.map(([k, re]) => [k, cpuByPid(re)]));
  const before = cpuSnapshot(groups);
  return () => {
    const seconds = (now() - started) / 1000;
    const after = cpuSnapshot(groups);
    const out: Record<string, number> = {};
    let ours = 0;
    for (const k of [...Object.keys(groups), 'bench']) {
      const re = groups[k];
      // Groups by name are summed per pid: Postgres backends come and go with the pools' connections.
      const used = re instanceof RegExp ? cpuSinceByPid(byPid.get(k)!, cpuByPid(re)) : after[k]! - before[k]!;
      out[k] = (used / seconds) * 100;
      ours += out[k]!;
    }
    out.others = Math.max(0, ((after.machine! - before.machine!) / seconds) * 100 - ours);
    out.seconds = seconds;
    return out;
  };
}

const cpuText = (cpu: Record<string, number>): string =>
  Object.entries(cpu)
    .filter(([k]) => k !== 'seconds')
    .map(([k, v]) => `${k} ${Math.round(v)}%`)
    .join(', ');

interface Phase {
  rate: number;
  cpu: Record<string, number>;
  note: string;
}

async function main(): Promise<void> {
  execFileSync(process.execPath, ['scripts/test-certs.mjs'], { cwd: ROOT, stdio: 'inherit' });
  console.log(
    `bench:capacity: plan ${PLAN.join(' → ')} (gateways and dispatchers), ${CONNECTIONS} connections, ${DURATION} s per load (+${WARMUP} s warm-up), ` +
      `${EVENTS} deliveries per run, reconciler ${RECONCILE_ROWS} rows; load average before: ${avg()}`,
  );
  const databaseUrl = await freshDatabase(PG_BASE, DB_NAME);
  const check = new pg.Client({ connectionString: databaseUrl });
  await check.connect();
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const eventsQueue = queueFor(JOBS.shipmentEvent, { connection: redis, prefix: PREFIX });
  const deliveryQueue = queueFor(JOBS.delivery, { connection: redis, prefix: PREFIX });

  const gateways: Array<ChildProcess | undefined> = [undefined, undefined];
  const dispatchers: Array<ChildProcess | undefined> = [undefined, undefined];
  const startGateway = async (i: number): Promise<void> => {
    gateways[i] = startService(`gateway${i + 1}`, ['--import', 'tsx', 'services/gateway/src/main.ts'], {
      DATABASE_URL: databaseUrl,
      REDIS_URL,
      REDIS_PREFIX: PREFIX,
      PORT: String(gatewayPort(i)),
      GATEWAY_METRICS_PORT: String(gatewayMetricsPort(i)),
      ADMIN_TOKEN: ADMIN,
      LOG_LEVEL: 'warn',
      RATE_LIMIT_PER_MINUTE: '10000000',
    });
    await waitFor(`http://127.0.0.1:${gatewayMetricsPort(i)}/readyz`, (s) => s === 200);
  };
  const startDispatcher = async (i: number): Promise<void> => {
    dispatchers[i] = child(`dispatcher${i + 1}`, 'services/dispatcher/src/main.ts', {
      DATABASE_URL: databaseUrl,
      REDIS_URL,
      REDIS_PREFIX: PREFIX,
      DISPATCHER_METRICS_PORT: String(dispatcherMetricsPort(i)),
      ...(CONCURRENCY ? { DISPATCHER_CONCURRENCY: CONCURRENCY } : {}),
      DISPATCH_HOST_MAP: 'receiver.test=127.0.0.1',
      DISPATCH_ALLOW_CIDRS: '127.0.0.0/8',
      NODE_EXTRA_CA_CERTS: join(ROOT, '.test-certs', 'ca.pem'),
      LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'info',
    }, false);
    await waitFor(`http://127.0.0.1:${dispatcherMetricsPort(i)}/readyz`, (s) => s === 200);
  };
  const stopAt = async (list: Array<ChildProcess | undefined>, i: number): Promise<void> => {
    const c = list[i];
    list[i] = undefined;
    if (c) await stopChild(c);
  };

  const receiver = child('receiver', 'bench/dispatcher/receiver.ts', { RECEIVER_PORT: String(RECEIVER_PORT) }, true);
  const summary: Array<{ n: number; reads: Phase; creations: Phase; deliveries: Phase }> = [];
  try {
    await ask(receiver, {}, 'listening');
    await Promise.all([startGateway(0), startDispatcher(0)]);
    const base = `http://127.0.0.1:${gatewayPort(0)}`;
    const readTokens: string[] = [];
    for (let i = 0; i < READ_COMPANIES; i++) {
      const c = await company(base, ADMIN, {});
      readTokens.push(c.live, c.test);
    }
    const creators: string[] = [];
    for (let i = 0; i < CREATORS; i++) creators.push((await company(base, ADMIN, { limiteDiario: 1_000_000, planActivo: true, creditos: 100_000_000 })).live);
    // The deliveries' company: one webhook subscribed to everything (the creators have none, so
    // the creations measure the gateways, their events fanned out to nobody).
    const { empresaId, webhookIds, webhooksVersion } = await benchWebhooks(check, { nombre: 'Bench deliveries', receiverPort: RECEIVER_PORT });
    const webhookId = webhookIds[0]!;
    let eventNo = 0;
    const events = (n: number) => Array.from({ length: n }, () => eventJob(empresaId, eventNo++, new Date().toISOString(), webhooksVersion));
    await addEvents(eventsQueue, events(3000));
    await waitDelivered(dispatcherMetricsPort(0), 3000, 120_000);
    console.log(`  ${readTokens.length} read tokens, ${CREATORS} creating companies; warm-up: 3000 deliveries recorded`);

    let deliveriesExpected = 3000;
    for (const n of PLAN) {
      for (let i = 0; i < 2; i++) {
        if (i < n && !gateways[i]) await startGateway(i);
        if (i < n && !dispatchers[i]) await startDispatcher(i);
        if (i >= n) await Promise.all([stopAt(gateways, i), stopAt(dispatchers, i)]);
      }
      const groups = (): Record<string, number | RegExp> => {
        const g: Record<string, number | RegExp> = {};
        for (let i = 0; i < n; i++) g[`gateway${i + 1}`] = gateways[i]!.pid!;
        for (let i = 0; i < n; i++) g[`dispatcher${i + 1}`] = dispatchers[i]!.pid!;
        return { ...g, receiver: receiver.pid!, postgres: /^postgres$/, redis: /^redis-server$/ };
      };
      console.log(`\n${n} gateway(s) + ${n} dispatcher(s):`);

      // Reads and creations: one autocannon per gateway, the connections split between them.
      const drive = async (label: string, tokens: string[], method: 'GET' | 'POST', path: string, body?: string): Promise<Phase> => {
        await waitForQuiet();
        const run = (duration: number) =>
          Promise.all(
            Array.from({ length: n }, (_, i) =>
              autocannon({
                url: `http://127.0.0.1:${gatewayPort(i)}`,
                connections: Math.max(1, Math.round(CONNECTIONS / n)),
                duration,
                requests: rotating(tokens.filter((_, k) => k % n === i), method, path, body),
              }),
            ),
          );
        if (WARMUP > 0) await run(WARMUP);
        const meter = cpuMeter(groups());
        const results = await run(DURATION);
        const cpu = meter();
        const total = results.reduce((s, r) => s + r.requests.total, 0);
        const non2xx = results.reduce((s, r) => s + r.non2xx + r.errors + r.timeouts, 0);
        const rate = total / DURATION;
        const p99 = Math.max(...results.map((r) => r.latency.p99));
        const note = `p99 ${p99} ms (worst gateway), non-2xx/errors ${non2xx}`;
        console.log(`  ${label}: ${Math.round(rate)}/s, ${note}; CPU (% of one core): ${cpuText(cpu)}`);
        return { rate, cpu, note };
      };
      const reads = await drive('reads', readTokens, 'GET', '/api/v1/empresa');
      const creations = await drive('creations', creators, 'POST', '/api/v1/guias', SHIPMENT_BODY);

      // Deliveries: the creations' events fanned out first, then N events queued while paused.
      for (;;) {
        const c = await eventsQueue.getJobCounts('waiting', 'active', 'delayed', 'prioritized');
        if (Object.values(c).every((v) => v === 0)) break;
        await sleep(200);
      }
      await waitForQuiet();
      const ports = Array.from({ length: n }, (_, i) => dispatcherMetricsPort(i));
      await eventsQueue.pause();
      await addEvents(eventsQueue, events(EVENTS));
      const counted = await deliveredCount(ports);
      const meter = cpuMeter(groups());
      const started = now();
      await eventsQueue.resume();
      const ended = await waitDelivered(ports, counted + EVENTS, 300_000, 5);
      const cpu = meter();
      deliveriesExpected += EVENTS;
      const rate = EVENTS / ((ended - started) / 1000);
      const perDelivery = (k: string): string => ((cpu[k]! / 100) * cpu.seconds! * 1000 / EVENTS).toFixed(3);
      const note =
        `CPU ms per delivery: dispatchers ${Array.from({ length: n }, (_, i) => perDelivery(`dispatcher${i + 1}`)).join(' + ')}, ` +
        `Postgres ${perDelivery('postgres')}, Redis ${perDelivery('redis')}, receiver ${perDelivery('receiver')}`;
      console.log(`  deliveries: ${Math.round(rate)}/s; ${note}; CPU (% of one core): ${cpuText(cpu)}`);
      summary.push({ n, reads, creations, deliveries: { rate, cpu, note } });
    }

    const states = await check.query<{ estado: string; n: string }>(`select estado, count(*) n from entregas group by estado order by estado`);
    const shipments = await check.query<{ n: string }>(`select count(*) n from guias`);
    console.log(`\n  deliveries by state: ${states.rows.map((r) => `${r.estado} ${r.n}`).join(', ')} (expected exitosa ${deliveriesExpected}); shipments: ${shipments.rows[0]!.n}`);

    console.log('\nprocesses   reads/s  creations/s  deliveries/s   CPU (% of one core) gateways | dispatchers | Postgres | Redis | bench (load) | others, in the reads / creations / deliveries runs');
    const first = summary[0]!;
    for (const s of summary) {
      const sum = (cpu: Record<string, number>, prefix: string): string =>
        Object.entries(cpu)
          .filter(([k]) => k.startsWith(prefix))
          .map(([, v]) => Math.round(v))
          .join('+');
      const cpuCols = (p: Phase): string =>
        `${sum(p.cpu, 'gateway')} | ${sum(p.cpu, 'dispatcher')} | ${Math.round(p.cpu.postgres!)} | ${Math.round(p.cpu.redis!)} | ${Math.round(p.cpu.bench!)} | ${Math.round(p.cpu.others!)}`;
      const ratio = (p: Phase, q: Phase): string => `${((p.rate / q.rate) * 100).toFixed(0)}%`;
      console.log(
        `${s.n} + ${s.n}     ${String(Math.round(s.reads.rate)).padStart(7)}  ${String(Math.round(s.creations.rate)).padStart(11)}  ${String(Math.round(s.deliveries.rate)).padStart(12)}   ` +
          `(${ratio(s.reads, first.reads)} / ${ratio(s.creations, first.creations)} / ${ratio(s.deliveries, first.deliveries)} of the first)   ` +
          `reads ${cpuCols(s.reads)}; creations ${cpuCols(s.creations)}; deliveries ${cpuCols(s.deliveries)}`,
      );
    }

    // 2. The reconciler, with every service stopped so nothing else takes the rows or the jobs.
    await Promise.all([0, 1].flatMap((i) => [stopAt(gateways, i), stopAt(dispatchers, i)]));
    await reconcilerCost(check, databaseUrl, eventsQueue, deliveryQueue, empresaId, webhookId);
    console.log(`\n  load average after: ${avg()}`);
  } finally {
    await Promise.all([0, 1].flatMap((i) => [stopAt(gateways, i), stopAt(dispatchers, i)]));
    await endRun({ receiver, queues: [eventsQueue, deliveryQueue], redis, prefix: PREFIX });
    await check.end();
  }
}

async function reconcilerCost(
  check: pg.Client,
  databaseUrl: string,
  eventsQueue: Queue<ShipmentEventJob>,
  deliveryQueue: Queue<DeliveryJob>,
  empresaId: string,
  webhookId: string,
): Promise<void> {
  console.log(`\nreconciler: ${RECONCILE_ROWS} overdue pending deliveries, their jobs missing from Redis`);
  const t0 = now();
  // Relayed and fanned-out events an hour old, and one pending delivery each whose next attempt
  // was due an hour ago (past RECONCILE_GRACE_MS), as after a Redis that lost its queues.
  await check.query(
    `insert into outbox (id, empresa_id, evento, data, created_at, enviado_en, repartido_en, secuencia)
     select md5('rc' || g)::uuid, $1, 'GUIA_CREADA', jsonb_build_object('numeroGuia', 'SVCRC' || lpad(g::text, 8, '0'), 'estado', 'CREADA'),
            now() - interval '1 hour', now() - interval '1 hour', now() - interval '1 hour', 1
     from generate_series(1, $2::int) g`,
    [empresaId, RECONCILE_ROWS],
  );
  await check.query(
    `insert into entregas (id, webhook_id, evento_id, evento, estado, exitoso, intentos, numero_guia, created_at, proximo_intento_en)
     select md5('rd' || g)::uuid, $1, md5('rc' || g)::uuid, 'GUIA_CREADA', 'pendiente', false, 0, 'SVCRC' || lpad(g::text, 8, '0'),
            now() - interval '1 hour', now() - interval '1 hour'
     from generate_series(1, $2::int) g`,
    [webhookId, RECONCILE_ROWS],
  );
  await check.query('vacuum analyze outbox, entregas');
  console.log(`  fill: ${((now() - t0) / 1000).toFixed(1)} s`);

  const pool = createPool({ connectionString: databaseUrl, max: 4 });
  const db = createDb(pool);
  const requeued = { event: 0, delivery: 0 };
  // One shard: the reconciler's view of a sharded queue is the queue itself.
  const reconciler = createReconciler({
    db,
    eventsQueue: { addBulk: (jobs) => eventsQueue.addBulk(jobs), queueOf: () => eventsQueue },
    deliveryQueue: { addBulk: (jobs) => deliveryQueue.addBulk(jobs), queueOf: () => deliveryQueue },
    logger: createLogger('bench-reconciler', 'error'),
    requeued: (kind, n) => (requeued[kind] += n),
    intervalMs: 10_000,
    graceMs: 30_000,
  });
  try {
    await waitForQuiet();
    const groups = { postgres: /^postgres$/, redis: /^redis-server$/ };
    const waitingBefore = await deliveryQueue.getWaitingCount();
    let meter = cpuMeter(groups);
    let started = now();
    const pass = await reconciler.runOnce();
    let seconds = (now() - started) / 1000;
    let cpu = meter();
    const queued = (await deliveryQueue.getWaitingCount()) - waitingBefore;
    const ms = (k: string, per: number): string => (((cpu[k]! / 100) * cpu.seconds! * 1000) / per).toFixed(3);
    console.log(
      `  one pass: ${pass.deliveries} deliveries and ${pass.events} events queued again in ${(seconds * 1000).toFixed(0)} ms = ` +
        `${Math.round(pass.deliveries / seconds)} rows/s (delivery jobs waiting: +${queued}); CPU ms per 1000 rows: ` +
        `reconciler (bench process) ${ms('bench', pass.deliveries / 1000)}, Postgres ${ms('postgres', pass.deliveries / 1000)}, Redis ${ms('redis', pass.deliveries / 1000)}; ` +
        `CPU (% of one core): ${cpuText(cpu)}`,
    );
    if (pass.deliveries !== RECONCILE_ROWS || queued !== RECONCILE_ROWS) throw new Error(`expected ${RECONCILE_ROWS} deliveries queued again`);

    meter = cpuMeter(groups);
    started = now();
    for (let i = 0; i < IDLE_PASSES; i++) {
      const p = await reconciler.runOnce();
      if (p.deliveries + p.events > 0) throw new Error('an idle pass found work');
    }
    seconds = (now() - started) / 1000;
    cpu = meter();
    console.log(
      `  idle pass (nothing overdue; ${IDLE_PASSES} in a row, entregas ${(await check.query<{ n: string }>('select count(*) n from entregas')).rows[0]!.n} rows): ` +
        `${((seconds * 1000) / IDLE_PASSES).toFixed(1)} ms each; CPU ms per pass: reconciler ${ms('bench', IDLE_PASSES)}, ` +
        `Postgres ${ms('postgres', IDLE_PASSES)}, Redis ${ms('redis', IDLE_PASSES)} (once per RECONCILE_INTERVAL_MS, 10 s by default)`,
    );
  } finally {
    await reconciler.stop();
    await db.destroy();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
