// `pnpm bench:scale` (issue 38): how the stack's Redis load spreads over a Redis Cluster's masters.
// A throwaway 3-master cluster; for QUEUE_SHARDS 1 and 6 (BENCH_SCALE_SHARDS), with 1, 2 and 3
// dispatcher processes (BENCH_SCALE_DISPATCHERS), each pair of shard counts run back to back so the
// machine's drift touches both alike, a stack of its own (a database cloned from a migrated
// template, a new REDIS_PREFIX, one gateway, the dispatchers, all the compiled build); a delivery
// load end to end: BENCH_SCALE_COMPANIES companies, each with a live token and one webhook on the
// bench receiver, BENCH_SCALE_SHIPMENTS shipments created through `POST /api/v1/guias/batch`
// (BENCH_SCALE_BATCH a request, BENCH_SCALE_IN_FLIGHT requests at once, each with the next
// company's token), timed from the first request until the dispatchers have counted every
// delivery. Around it, `INFO commandstats` on each master: each master's share of the commands the
// stack ran (inside scripts included), commands per delivery, deliveries/s. Then issue 38's targets.
// Method and figures: bench/README.md (scale section).
import { randomBytes } from 'node:crypto';
import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import pg from 'pg';
import { Agent, request } from 'undici';
import { startRedisCluster, type RedisCluster } from '../../test/support/redis-cluster';
import { freshDatabase, prepareBuild, serviceArgs, stopChild, type ServiceBuild } from '../support/bench-process';
import { ask, child, deliveredCount, now, spawned, waitDelivered } from '../support/dispatcher-bench';
import { company, waitFor, waitForQuiet } from '../support/gateway-bench';
import { redisCommandStats, type RedisCommandStats } from '../support/redis-stats';
import { shardOf } from '@svc/contracts';

const ROOT = join(__dirname, '..', '..');
const num = (name: string, fallback: number): number => (process.env[name] ? Number(process.env[name]) : fallback);
const list = (name: string, fallback: string): number[] => (process.env[name] ?? fallback).split(',').map(Number).filter((n) => n > 0);
/** BENCH_SCALE shortens (or lengthens) the load, as in the other benches. */
const SCALE = num('BENCH_SCALE', 1);
const PG_BASE = (process.env.BENCH_DATABASE_BASE ?? 'postgres://postgres@127.0.0.1:5432').replace(/\/$/, '');
const DB_NAME = process.env.BENCH_DB_NAME ?? 'svc_bench_scale';
const SHARDS = list('BENCH_SCALE_SHARDS', '1,6');
const DISPATCHERS = list('BENCH_SCALE_DISPATCHERS', '1,2,3');
/**
 * Companies go to shards by a hash of their ids: with a few dozen, one master's two shards can get
 * far more than a third of them; 120 (20 a shard) keeps each master near its third, as a real
 * stack's many companies do.
 */
const COMPANIES = num('BENCH_SCALE_COMPANIES', 120);
const SHIPMENTS = Math.max(200, Math.round(num('BENCH_SCALE_SHIPMENTS', 6000) * SCALE));
const WARMUP_SHIPMENTS = Math.max(100, Math.round(num('BENCH_SCALE_WARMUP', 600) * SCALE));
const BATCH = num('BENCH_SCALE_BATCH', 20);
/** Requests at once: enough to keep every dispatcher busy without a queue of answers in the gateway. */
const IN_FLIGHT = num('BENCH_SCALE_IN_FLIGHT', 8);
/** Issue 38: with QUEUE_SHARDS=6 on 3 masters, no master serves more than this share. */
const MAX_MASTER_SHARE = 0.4;
// Ports of helper range 7200-7299 (and 17200-17299, the cluster bus of 7200-7202): BENCH_SCALE_PORT moves them all.
const PORT = num('BENCH_SCALE_PORT', 7200);
const CLUSTER_PORTS = [PORT, PORT + 1, PORT + 2];
const GATEWAY_PORT = PORT + 20;
const GATEWAY_METRICS_PORT = PORT + 21;
const dispatcherMetricsPort = (i: number): number => PORT + 30 + i;
const RECEIVER_PORT = PORT + 40;
const ADMIN = `bench-admin-${randomBytes(12).toString('hex')}`;
/** The bench's own reads of the counters, left out of the stack's commands. */
const OWN_COMMANDS = new Set(['info']);

interface RunResult {
  shards: number;
  dispatchers: number;
  deliveries: number;
  seconds: number;
  /** Commands each master ran during the load, in the cluster's master order. */
  perMaster: number[];
  /** How many of the companies each shard has. */
  companiesPerShard: number[];
}

const total = (r: RunResult): number => r.perMaster.reduce((a, b) => a + b, 0);
const maxShare = (r: RunResult): number => Math.max(...r.perMaster) / total(r);
const rate = (r: RunResult): number => r.deliveries / r.seconds;
const perDelivery = (r: RunResult): number => total(r) / r.deliveries;

function commandsOf(s: RedisCommandStats): number {
  let n = 0;
  for (const [name, calls] of s.calls) if (!OWN_COMMANDS.has(name)) n += calls;
  return n;
}

/** A database cloned from the migrated template (much faster than migrating each). */
async function cloneDatabase(template: string, name: string): Promise<string> {
  const adminClient = new pg.Client({ connectionString: `${PG_BASE}/postgres` });
  await adminClient.connect();
  try {
    await adminClient.query(`drop database if exists "${name}" with (force)`);
    await adminClient.query(`create database "${name}" template "${template}"`);
  } finally {
    await adminClient.end();
  }
  return `${PG_BASE}/${name}`;
}

async function oneRun(build: ServiceBuild, cluster: RedisCluster, masters: Redis[], template: string, shards: number, dispatchers: number): Promise<RunResult> {
  const databaseUrl = await cloneDatabase(template, `${DB_NAME}_run`);
  const common = {
    DATABASE_URL: databaseUrl,
    REDIS_CLUSTER_NODES: cluster.nodes,
    REDIS_PREFIX: `svcbench:scale:${randomBytes(4).toString('hex')}`,
    QUEUE_SHARDS: String(shards),
    DISPATCH_HOST_MAP: 'receiver.test=127.0.0.1',
    DISPATCH_ALLOW_CIDRS: '127.0.0.0/8',
    NODE_EXTRA_CA_CERTS: join(ROOT, '.test-certs', 'ca.pem'),
    LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'warn',
  };
  const children: ChildProcess[] = [];
  const agent = new Agent({ connections: IN_FLIGHT * 2, keepAliveTimeout: 30_000 });
  try {
    children.push(
      spawned(`gateway-s${shards}`, serviceArgs('gateway', build), {
        ...common,
        PORT: String(GATEWAY_PORT),
        GATEWAY_METRICS_PORT: String(GATEWAY_METRICS_PORT),
        ADMIN_TOKEN: ADMIN,
        // The rate-limit script still runs on every request; only the contract's 100/min would refuse most.
        RATE_LIMIT_PER_MINUTE: '10000000',
      }),
    );
    const metricsPorts = Array.from({ length: dispatchers }, (_, i) => dispatcherMetricsPort(i + 1));
    for (const [i, port] of metricsPorts.entries()) {
      children.push(spawned(`dispatcher-s${shards}-${i + 1}`, serviceArgs('dispatcher', build), { ...common, DISPATCHER_METRICS_PORT: String(port) }));
    }
    await waitFor(`http://127.0.0.1:${GATEWAY_METRICS_PORT}/readyz`, (s) => s === 200);
    for (const port of metricsPorts) await waitFor(`http://127.0.0.1:${port}/readyz`, (s) => s === 200);

    const base = `http://127.0.0.1:${GATEWAY_PORT}`;
    const tokens: string[] = [];
    const companiesPerShard = new Array<number>(shards).fill(0);
    for (let c = 0; c < COMPANIES; c++) {
      const { id, live } = await company(base, ADMIN, { planActivo: true, creditos: 1_000_000, limiteDiario: 1_000_000 });
      const res = await fetch(`${base}/api/v1/webhooks`, {
        method: 'POST',
        headers: { authorization: `Bearer ${live}`, 'content-type': 'application/json' },
        body: JSON.stringify({ url: `https://receiver.test:${RECEIVER_PORT}/scale/${c}`, eventos: [] }),
      });
      if (res.status !== 201) throw new Error(`webhook: ${res.status} ${await res.text()}`);
      tokens.push(live);
      companiesPerShard[shardOf(id, shards)]! += 1;
    }

    const body = JSON.stringify({
      guias: Array.from({ length: BATCH }, (_, i) => ({
        destinatario: { nombre: 'Cliente Bench', telefono: '+502 5555 0000', direccion: '6a Avenida 10-20, Zona 1' },
        paquete: { peso: 2.5 },
        referencia: `SCALE-${i}`,
      })),
    });
    let turn = 0;
    /** Sends `shipments` shipments, IN_FLIGHT requests at once, each with the next company's token. */
    const load = async (shipments: number): Promise<void> => {
      let left = Math.ceil(shipments / BATCH);
      const lane = async (): Promise<void> => {
        while (left-- > 0) {
          const res = await request(`${base}/api/v1/guias/batch`, {
            method: 'POST',
            dispatcher: agent,
            headers: { authorization: `Bearer ${tokens[turn++ % tokens.length]!}`, 'content-type': 'application/json' },
            body,
          });
          const text = await res.body.text();
          if (res.statusCode !== 201) throw new Error(`POST /api/v1/guias/batch: ${res.statusCode} ${text}`);
        }
      };
      await Promise.all(Array.from({ length: IN_FLIGHT }, lane));
    };
    const requested = (shipments: number): number => Math.ceil(shipments / BATCH) * BATCH;

    // The warm-up (connections, scripts loaded, JIT), delivered before the counters are read.
    await load(WARMUP_SHIPMENTS);
    const warm = requested(WARMUP_SHIPMENTS);
    await waitDelivered(metricsPorts, warm, 120_000);
    const before = await Promise.all(masters.map(redisCommandStats));
    const started = now();
    await load(SHIPMENTS);
    const finished = await waitDelivered(metricsPorts, warm + requested(SHIPMENTS), 300_000);
    const after = await Promise.all(masters.map(redisCommandStats));
    const failures = await deliveredCount(metricsPorts, 'failure');
    if (failures) throw new Error(`${failures} deliveries failed`);
    return {
      shards,
      dispatchers,
      deliveries: requested(SHIPMENTS),
      seconds: (finished - started) / 1000,
      perMaster: masters.map((_, i) => commandsOf(after[i]!) - commandsOf(before[i]!)),
      companiesPerShard,
    };
  } finally {
    await Promise.all(children.map((c) => stopChild(c)));
    await agent.close();
  }
}

const pct = (x: number): string => `${(x * 100).toFixed(1)}%`;

async function main(): Promise<void> {
  const build = prepareBuild(ROOT);
  console.log(`pnpm bench:scale: QUEUE_SHARDS ${SHARDS.join(', ')} x dispatchers ${DISPATCHERS.join(', ')}; ${COMPANIES} companies, ${SHIPMENTS} shipments a run (batches of ${BATCH}, ${IN_FLIGHT} at once), build ${build}`);
  const template = await freshDatabase(PG_BASE, `${DB_NAME}_template`).then(() => `${DB_NAME}_template`);
  const cluster = await startRedisCluster(3, 30_000, { ports: CLUSTER_PORTS });
  const masters = cluster.ports.map((port) => new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1 }));
  const receiver = child('receiver', join(__dirname, '..', 'dispatcher', 'receiver.ts'), { RECEIVER_PORT: String(RECEIVER_PORT) }, true);
  const results: RunResult[] = [];
  try {
    await ask(receiver, {}, 'listening');
    for (const dispatchers of DISPATCHERS) {
      for (const shards of SHARDS) {
        await waitForQuiet();
        const r = await oneRun(build, cluster, masters, template, shards, dispatchers);
        results.push(r);
        console.log(
          `  QUEUE_SHARDS=${shards}, ${dispatchers} dispatcher(s): ${rate(r).toFixed(0)} deliveries/s, ` +
            `${perDelivery(r).toFixed(2)} Redis commands/delivery, masters ${r.perMaster.map((n) => pct(n / total(r))).join(' / ')}; companies per shard ${r.companiesPerShard.join(' ')}`,
        );
      }
    }
  } finally {
    receiver.send({ cmd: 'exit' });
    await stopChild(receiver);
    for (const m of masters) m.disconnect();
    await cluster.stop();
  }

  console.log('\nshards  dispatchers  deliveries/s  commands/delivery  busiest master  master shares');
  for (const r of results) {
    console.log(
      `${String(r.shards).padStart(6)}  ${String(r.dispatchers).padStart(11)}  ${rate(r).toFixed(0).padStart(12)}  ${perDelivery(r).toFixed(2).padStart(17)}  ` +
        `${pct(maxShare(r)).padStart(14)}  ${r.perMaster.map((n) => pct(n / total(r))).join(' / ')}`,
    );
  }
  const targets: Array<[string, boolean]> = [];
  const one = (d: number): RunResult | undefined => results.find((r) => r.shards === 1 && r.dispatchers === d);
  for (const r of results.filter((x) => x.shards === 6)) {
    targets.push([`QUEUE_SHARDS=6, ${r.dispatchers} dispatcher(s): busiest master ${pct(maxShare(r))} <= ${pct(MAX_MASTER_SHARE)}`, maxShare(r) <= MAX_MASTER_SHARE]);
    const o = one(r.dispatchers);
    if (!o) continue;
    targets.push([`  deliveries/s ${rate(r).toFixed(0)} >= ${rate(o).toFixed(0)} (QUEUE_SHARDS=1)`, rate(r) >= rate(o)]);
    targets.push([`  commands/delivery ${perDelivery(r).toFixed(2)} <= ${perDelivery(o).toFixed(2)} (QUEUE_SHARDS=1)`, perDelivery(r) <= perDelivery(o)]);
  }
  console.log("\nissue 38's targets:");
  for (const [what, ok] of targets) console.log(`  ${ok ? 'pass' : 'FAIL'}  ${what}`);
  if (targets.some(([, ok]) => !ok)) process.exitCode = 1;
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
