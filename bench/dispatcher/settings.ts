// Every knob of `pnpm bench:dispatcher`, read once from the environment (bench/README.md lists them).
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';

export const ROOT = join(__dirname, '..', '..');
export const PG_BASE = (process.env.BENCH_DATABASE_BASE ?? 'postgres://postgres@127.0.0.1:5432').replace(/\/$/, '');
export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
/** BENCH_DB_NAME: the database the run drops and makes afresh (two runs at once need two names, and ports of their own). */
export const DB_NAME = process.env.BENCH_DB_NAME ?? 'svc_bench_dispatcher';
export const PREFIX = `svcbench:disp:${randomBytes(4).toString('hex')}`;

const num = (name: string, fallback: number): number => (process.env[name] === undefined || process.env[name] === '' ? fallback : Number(process.env[name]));
const list = (name: string, fallback: string): number[] => (process.env[name] ?? fallback).split(',').filter((x) => x.trim() !== '').map(Number);

/**
 * BENCH_SCALE (1): multiplies the default of every duration and count below (not one set
 * explicitly), e.g. 0.3 for a quick run of every phase; figures from a scaled run are noisier.
 */
export const SCALE = num('BENCH_SCALE', 1);
const scaled = (name: string, fallback: number, least = 1): number => num(name, Math.max(least, Math.round(fallback * SCALE)));

/**
 * BENCH_ONLY: the phases to run, comma-separated, all by default: `saturation` (the no-op worker's
 * baseline and the one-webhook saturation), `paced` (200 and 500 events/s, one webhook), `latency`
 * (the fleet saturated at each receiver latency), `fleet-paced` (commit → receipt at 500 events/s to
 * the fleet at 100 ms), `e2e` (through the gateway's batch API), `hang` (1% of webhooks never
 * answer), `retry` (attempt gaps while saturated).
 */
export const PHASES = ['saturation', 'paced', 'latency', 'fleet-paced', 'e2e', 'hang', 'retry'] as const;
export type Phase = (typeof PHASES)[number];
const only = process.env.BENCH_ONLY?.split(',').map((s) => s.trim());
export const runs = (phase: Phase): boolean => !only || only.includes(phase);

// ---- the one-webhook phases (issue 16) -----------------------------------------------------------

export const EVENTS = scaled('BENCH_EVENTS', 20_000, 1000);
export const WARMUP_EVENTS = scaled('BENCH_WARMUP_EVENTS', 3000, 500);
export const WEBHOOKS = num('BENCH_WEBHOOKS', 1);
/**
 * BENCH_CONCURRENCY: given to the dispatcher as DISPATCHER_CONCURRENCY when set; unset, the
 * dispatcher runs at its own default, as the issues' targets are at the default settings. The no-op
 * worker takes this many jobs at once, 50 (the default until issue 30) when unset.
 */
export const CONCURRENCY = process.env.BENCH_CONCURRENCY ? Number(process.env.BENCH_CONCURRENCY) : undefined;
export const NOOP_CONCURRENCY = CONCURRENCY ?? 50;
export const PACED_RATES = list('BENCH_PACED_RATES', '200,500').filter((r) => r > 0);
export const PACED_SECONDS = scaled('BENCH_PACED_SECONDS', 15, 3);
/**
 * Seconds each paced phase (the no-op worker's and the dispatcher's) runs at its rate before it is
 * measured. Each process sits idle while the other is measured, and V8 may then run a full
 * collection that throws away optimized code (`weak objects` deoptimizations: 111 functions of the
 * dispatcher in one run, bench/HISTORY.md "sixth session"); without a lead-in, the figure at a rate
 * includes re-optimizing them. 0 measures from the first event, as the script did before.
 */
export const PACED_LEAD_SECONDS = scaled('BENCH_PACED_LEAD_SECONDS', 5, 1);
/** Dispatcher CPU ms per delivery at 200/s of the code before issue 16, to compare with (target: at most half). */
export const REF_CPU_200 = process.env.BENCH_REF_CPU_200 ? Number(process.env.BENCH_REF_CPU_200) : undefined;
/**
 * The same, as a multiple of the paced no-op worker's CPU per job at 200/s in its own run: the
 * code before issue 16 measured with this script. Preferred to BENCH_REF_CPU_200 when both are set:
 * on this kind of machine every process's CPU per delivery at a paced rate moves up and down
 * together by a third from one run to the next (bench/README.md), and the ratio cancels it.
 */
export const REF_RATIO_200 = process.env.BENCH_REF_RATIO_200 ? Number(process.env.BENCH_REF_RATIO_200) : undefined;
export const RECEIVER_PORT = num('BENCH_RECEIVER_PORT', 3943);
export const METRICS_PORT = num('BENCH_METRICS_PORT', 3944);

// ---- real receivers (issue 30) -------------------------------------------------------------------

/** The fleet: companies, each with this many branches and one webhook per branch (10 is the contract's most per company). */
export const FLEET_COMPANIES = num('BENCH_FLEET_COMPANIES', 100);
export const FLEET_WEBHOOKS_PER_COMPANY = num('BENCH_FLEET_WEBHOOKS', 10);
/** Company i's webhooks are at https://receiver.test:<BENCH_FLEET_PORT + i>: one origin per company. */
export const FLEET_PORT = num('BENCH_FLEET_PORT', 4100);
/** Receiver latencies (ms) the fleet is saturated at; 0 is the reference of the ratios. */
export const LATENCIES = list('BENCH_LATENCIES', '0,100,500').filter((l) => l >= 0);
/** Each saturated phase runs this long before it is measured (connections, JIT, the queue's backlog), then is measured for the other. */
export const FLEET_RAMP_SECONDS = scaled('BENCH_FLEET_RAMP_SECONDS', 5, 2);
export const FLEET_SECONDS = scaled('BENCH_FLEET_SECONDS', 15, 3);
/** Events per second of the fleet's paced phase, each to one webhook, at BENCH_FLEET_PACED_LATENCY_MS. */
export const FLEET_PACED_RATE = num('BENCH_FLEET_PACED_RATE', 500);
export const FLEET_PACED_LATENCY_MS = num('BENCH_FLEET_PACED_LATENCY_MS', 100);
/** Percentage of the fleet's webhooks that never answer in the hang and retry phases; the others answer after BENCH_HANG_LATENCY_MS. */
export const HANG_PERCENT = num('BENCH_HANG_PERCENT', 1);
export const HANG_LATENCY_MS = num('BENCH_HANG_LATENCY_MS', 100);
/**
 * Seconds the hang phase runs before it is measured: a never-answering webhook's first attempts
 * end at the 5 s deadline, it is held to fewer slots after two failures, and its first retries come
 * after that; 12 s sees all three before the measure starts.
 */
export const HANG_RAMP_SECONDS = scaled('BENCH_HANG_RAMP_SECONDS', 12, 6);
/** Failing webhooks (answer 500 at once), one per company, and the events sent to them at BENCH_RETRY_RATE per second. */
export const RETRY_WEBHOOKS = num('BENCH_RETRY_WEBHOOKS', 20);
export const RETRY_EVENTS = scaled('BENCH_RETRY_EVENTS', 200, 20);
export const RETRY_RATE = num('BENCH_RETRY_RATE', 20);
/** How long after the last of those events the phase waits for their third attempts (those still missing count as late as the wait). */
export const RETRY_WAIT_SECONDS = num('BENCH_RETRY_WAIT_SECONDS', 60);
/** The end-to-end phase: shipments per second through `POST /api/v1/guias/batch`, in batches of BENCH_E2E_BATCH, with live branch tokens. */
export const E2E_RATE = num('BENCH_E2E_RATE', 500);
export const E2E_BATCH = num('BENCH_E2E_BATCH', 10);
export const E2E_SECONDS = scaled('BENCH_E2E_SECONDS', 15, 3);
export const E2E_LEAD_SECONDS = scaled('BENCH_E2E_LEAD_SECONDS', 5, 1);
export const E2E_LATENCY_MS = num('BENCH_E2E_LATENCY_MS', 100);
export const GATEWAY_PORT = num('BENCH_GATEWAY_PORT', 3945);
export const GATEWAY_METRICS_PORT = GATEWAY_PORT + 1;
