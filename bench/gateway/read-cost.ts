// `npx tsx bench/gateway/read-cost.ts`: the CPU one authenticated `GET /api/v1/empresa` costs the
// compiled gateway, and one bare express read, at a fixed request rate well below saturation, for
// several node binaries or flag sets in alternation (bench/README.md, "Read cost"). A busy shared
// machine moves saturated rates by a factor of two; CPU per request at a light fixed load moves far
// less, so this is the probe for comparing variants of the read path on such a day.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { Redis } from 'ioredis';
import { cpuSnapshot } from '../support/cpu';
import { freshDatabase, prepareBuild, prodNodeFlags, stopChild } from '../support/bench-process';
import { company as makeCompany, rotating, waitFor } from '../support/gateway-bench';
import { deletePrefix } from '../../test/support/redis-prefix';

const ROOT = join(__dirname, '..', '..');
const PG_BASE = (process.env.BENCH_DATABASE_BASE ?? 'postgres://postgres@127.0.0.1:5432').replace(/\/$/, '');
const DB_NAME = process.env.BENCH_DB_NAME ?? 'svc_bench_read_cost';
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const PREFIX = `svcbench:rc:${randomBytes(4).toString('hex')}`;
const PORT = Number(process.env.BENCH_GATEWAY_PORT ?? 3911);
const ADMIN = 'bench-admin-token-0123456789abcdef';
/** Requests per second for every variant: light enough that the machine's other work barely moves it. */
const RATE = Number(process.env.BENCH_READ_RATE ?? 500);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10);
const SECONDS = Number(process.env.BENCH_DURATION ?? 10);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 3);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const TOKENS = Number(process.env.BENCH_READ_TOKENS ?? 1000);

interface Variant {
  label: string;
  node: string;
  flags: string[];
  /** The gateway's compiled entry: this checkout's, or another's (`MAIN=/other/checkout/services/gateway/dist/main.js`). */
  main: string;
}

/**
 * BENCH_VARIANTS: `label=/path/to/node flag flag;label2=...`; `node` alone is this process's node,
 * `PROD` the production flags (package.json's start:prod), `MAIN=<path>` another checkout's compiled
 * gateway (an older commit's, built there), run from that checkout. Default: `prod=node PROD`.
 */
function variants(): Variant[] {
  const spec = process.env.BENCH_VARIANTS;
  const own = join(ROOT, 'services', 'gateway', 'dist', 'main.js');
  if (!spec) return [{ label: 'prod', node: process.execPath, flags: prodNodeFlags('gateway'), main: own }];
  return spec.split(';').map((part) => {
    const at = part.indexOf('=');
    const label = part.slice(0, at);
    const rest = part.slice(at + 1);
    const [node = 'node', ...words] = rest.trim().split(/\s+/);
    const main = words.find((w) => w.startsWith('MAIN='))?.slice('MAIN='.length) ?? own;
    const flags = words.filter((w) => !w.startsWith('MAIN=')).flatMap((f) => (f === 'PROD' ? prodNodeFlags('gateway') : [f]));
    return { label: label.trim(), node: node === 'node' ? process.execPath : node, flags, main };
  });
}

function start(v: Variant, args: string[], env: Record<string, string>, cwd = ROOT): ChildProcess {
  const child = spawn(v.node, [...v.flags, ...args], { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
  child.stderr?.on('data', (b: Buffer) => process.stderr.write(`[${v.label}] ${b.toString()}`));
  return child;
}

const gatewayEnv = (databaseUrl: string): Record<string, string> => ({
  DATABASE_URL: databaseUrl,
  REDIS_URL,
  REDIS_PREFIX: PREFIX,
  PORT: String(PORT),
  GATEWAY_METRICS_PORT: String(PORT + 1),
  ADMIN_TOKEN: ADMIN,
  LOG_LEVEL: 'warn',
  RATE_LIMIT_PER_MINUTE: '10000000',
});

async function load(url: string, requests: autocannon.Request[] | undefined, seconds: number): Promise<number> {
  const result = await autocannon({ url, connections: CONNECTIONS, overallRate: RATE, duration: seconds, ...(requests ? { requests } : {}) });
  if (result.non2xx > 0 || result.errors > 0) throw new Error(`${url}: ${result.non2xx} non-2xx, ${result.errors} errors`);
  return result.requests.total;
}

/** The gateway of `v`, from its own checkout (services/gateway/dist/main.js three levels below it). */
const startGateway = (v: Variant, databaseUrl: string): ChildProcess => start(v, [v.main], gatewayEnv(databaseUrl), join(v.main, '..', '..', '..', '..'));

/** µs of the child's CPU (user + system) per request over `SECONDS` at RATE, after a warm-up. */
async function costOf(child: ChildProcess, url: string, requests?: autocannon.Request[]): Promise<number> {
  await load(url, requests, WARMUP);
  const before = cpuSnapshot({ p: child.pid! }).p!;
  const n = await load(url, requests, SECONDS);
  const after = cpuSnapshot({ p: child.pid! }).p!;
  return ((after - before) * 1e6) / n;
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;

async function main(): Promise<void> {
  prepareBuild(ROOT);
  const databaseUrl = await freshDatabase(PG_BASE, DB_NAME);
  const all = variants();
  const base = `http://127.0.0.1:${PORT}`;
  // Companies and tokens once, through the first variant; every gateway after reads them from Postgres.
  const maker = startGateway(all[0]!, databaseUrl);
  await waitFor(`http://127.0.0.1:${PORT + 1}/readyz`, (s) => s === 200);
  const tokens: string[] = [];
  while (tokens.length < TOKENS) {
    const c = await makeCompany(base, ADMIN, {});
    tokens.push(c.live, c.test);
  }
  await stopChild(maker);

  const figures = new Map<string, { gateway: number[]; bare: number[] }>(all.map((v) => [v.label, { gateway: [], bare: [] }]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const v of all) {
      const gateway = startGateway(v, databaseUrl);
      await waitFor(`http://127.0.0.1:${PORT + 1}/readyz`, (s) => s === 200);
      // A first pass over every token fills the token cache: the probe measures cached reads.
      await load(base, rotating(tokens, 'GET', '/api/v1/empresa'), Math.ceil(TOKENS / RATE) + 1);
      const g = await costOf(gateway, base, rotating(tokens, 'GET', '/api/v1/empresa'));
      await stopChild(gateway);
      const bare = start(v, ['--import', 'tsx', 'bench/gateway/bare-express.ts'], { PORT: String(PORT + 2) });
      await waitFor(`http://127.0.0.1:${PORT + 2}/api/v1/empresa`, (s) => s === 200);
      const b = await costOf(bare, `http://127.0.0.1:${PORT + 2}/api/v1/empresa`);
      await stopChild(bare);
      figures.get(v.label)!.gateway.push(g);
      figures.get(v.label)!.bare.push(b);
      console.log(`round ${round + 1} ${v.label}: gateway ${g.toFixed(0)} µs/read, bare express ${b.toFixed(0)} µs/read`);
    }
  }
  console.log(`\nvariant      gateway µs/read (median of ${ROUNDS})  bare µs/read  bare/gateway`);
  for (const [label, f] of figures) {
    const g = median(f.gateway);
    const b = median(f.bare);
    console.log(`${label.padEnd(12)} ${g.toFixed(0).padStart(10)} (${f.gateway.map((x) => x.toFixed(0)).join(', ')})  ${b.toFixed(0).padStart(12)}  ${(b / g).toFixed(2).padStart(12)}`);
  }
  const redis = new Redis(REDIS_URL);
  await deletePrefix(redis, PREFIX);
  redis.disconnect();
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
