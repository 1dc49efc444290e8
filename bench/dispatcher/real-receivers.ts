// The phases of `pnpm bench:dispatcher` with receivers as real ones behave (issue 30): the fleet
// (100 companies, 1,000 webhooks) saturated at each receiver latency; 1% of its webhooks never
// answering; and, while the dispatcher stays saturated by them, failing webhooks whose gaps between
// attempts are measured where they land. Method: bench/README.md ("Issue 30's phases").
import type { ShipmentEventJob } from '@svc/contracts';
import { addEvents, ask, deliveredCount, eventJob, now, settleDrainedOutbox, sleep } from '../support/dispatcher-bench';
import { startFeeder } from '../support/fleet';
import {
  ascending,
  configureReceiver,
  loadMeter,
  memoryMeter,
  memoryText,
  ms,
  paced,
  pct,
  perDelivery,
  printLoad,
  waitIdle,
  type Bench,
  type Load,
  type Memory,
} from './bench';
import { METRICS_PORT, RETRY_EVENTS, RETRY_RATE, RETRY_WAIT_SECONDS } from './settings';

/** A window of a saturated phase: the fleet's successful deliveries per second while the queue never ran dry. */
export interface Saturated {
  label: string;
  latencyMs: number;
  /** Webhooks that never answer during it. */
  hanging: number;
  /** Successful deliveries per second over the window (the hanging webhooks' attempts never succeed, so these are the others'). */
  rate: number;
  seconds: number;
  load: Load;
  memory: Memory;
}

export interface SaturatedOptions {
  label: string;
  latencyMs: number;
  /** Paths of the webhooks that never answer. */
  hang: readonly string[];
  rampSeconds: number;
  windowSeconds: number;
}

/** Successful deliveries so far, by the dispatcher's counter (moved once a delivery's record has committed). */
const successes = (): Promise<number> => deliveredCount([METRICS_PORT], 'success');

/**
 * Measures one window of saturation: the receivers set to `latencyMs` (and `hang`), the feeder
 * keeping the events queue full from `rampSeconds` before the window until `then` (if any) has run
 * after it; then what the queue still holds is drained, the receivers answer every held request,
 * and the run waits until the dispatcher has nothing left.
 */
export async function saturated(
  b: Bench,
  next: () => ShipmentEventJob,
  opts: SaturatedOptions,
  then?: () => Promise<void>,
): Promise<Saturated> {
  await configureReceiver(b, opts.latencyMs, opts.hang);
  const memory = await memoryMeter(b, { dispatcher: b.dispatcher?.pid });
  const feeder = startFeeder(b.eventsQueue, next, { db: b.pool });
  let result: Saturated;
  try {
    await sleep(opts.rampSeconds * 1000);
    const before = await successes();
    const meter = await loadMeter(b);
    const started = now();
    await sleep(opts.windowSeconds * 1000);
    const delivered = (await successes()) - before;
    const seconds = (now() - started) / 1000;
    const load = await meter(delivered);
    result = { label: opts.label, latencyMs: opts.latencyMs, hanging: opts.hang.length, rate: delivered / seconds, seconds, load, memory: await memory() };
    console.log(
      `  ${opts.label}: ${delivered} deliveries in ${seconds.toFixed(1)} s = ${Math.round(result.rate)} deliveries/s` +
        `${opts.hang.length ? ` to the others (${opts.hang.length} webhooks never answer)` : ''} (after ${opts.rampSeconds} s of the same load, not measured); ` +
        `dispatcher CPU per delivery ${perDelivery(load, 'dispatcher').toFixed(3)} ms; ${memoryText(result.memory)}`,
    );
    await printLoad(b, load, 'the feeder adds events to the queue meanwhile (Redis includes its adds)');
    if (then) await then();
  } finally {
    await feeder.stop();
  }
  await drain(b);
  return result;
}

/** Empties what the feeder queued and the dispatcher has not taken, answers every held request, and waits until nothing is left. */
export async function drain(b: Bench): Promise<void> {
  const started = now();
  await b.eventsQueue.pause();
  await b.eventsQueue.drain();
  await b.eventsQueue.resume();
  await configureReceiver(b, 0, []);
  await waitIdle(b, 300_000);
  await settleDrainedOutbox(b.pool);
  console.log(`    drained in ${((now() - started) / 1000).toFixed(1)} s (events not yet taken removed; what was taken delivered)`);
}

/** The failing webhooks' tenants: each a company with one webhook that answers 500. */
export interface RetryTenant {
  empresaId: string;
  webhooksVersion: number | undefined;
}

/** Gaps between a delivery's attempts at the receiver: from the answer to attempt n to the arrival of attempt n + 1, less the contract's delay. */
export interface RetryGaps {
  /** Deliveries sent to the failing webhooks, those whose first attempt came, and those that had their third. */
  deliveries: number;
  seen: number;
  complete: number;
  /** Gaps whose attempt had not come by the end of the wait, though due: counted with the time waited past the due time (a lower bound). */
  censored: number;
  /** |gap − expected| in ms, after attempt 1 (expected 1 s) and after attempt 2 (expected 2 s). */
  first: number[];
  second: number[];
  /** Gap − expected (signed, ms): late is positive. */
  signed: number[];
  /** The fleet's deliveries per second meanwhile, and what the phase cost. */
  rate: number;
  load: Load;
  memory: Memory;
}

export const RETRY_TOLERANCE_MS = 250;
const EXPECTED_GAPS_MS = [1000, 2000];

/**
 * The retry-precision phase, run while a saturated phase's feeder still fills the queue: events to
 * the failing tenants in turn at RETRY_RATE per second, RETRY_EVENTS in all, then until every
 * delivery has had its three attempts, or RETRY_WAIT_SECONDS after the last event. A gap whose
 * attempt had not come by then counts with the time waited so far (a lower bound: it is later still).
 */
export async function retryPrecision(b: Bench, tenants: readonly RetryTenant[]): Promise<RetryGaps> {
  await ask(b.receiver, { cmd: 'attempts' }, 'attempts');
  const memory = await memoryMeter(b, { dispatcher: b.dispatcher?.pid });
  const before = await successes();
  const meter = await loadMeter(b);
  const started = now();
  await paced(RETRY_RATE, RETRY_EVENTS, (i) => {
    const t = tenants[i % tenants.length]!;
    return addEvents(b.eventsQueue, [eventJob(t.empresaId, 20_000_000 + i, new Date().toISOString(), t.webhooksVersion)], b.pool);
  });
  const attempts = new Map<string, Array<[number, number]>>();
  let count = 0;
  const until = now() + RETRY_WAIT_SECONDS * 1000;
  while (count < 3 * RETRY_EVENTS && now() < until) {
    await sleep(500);
    const got = await ask<{ attempts: Array<[string, number, number]> }>(b.receiver, { cmd: 'attempts' }, 'attempts');
    for (const [id, arrived, answered] of got.attempts) {
      let list = attempts.get(id);
      if (!list) attempts.set(id, (list = []));
      list.push([arrived, answered]);
      count++;
    }
  }
  const ended = now();
  const delivered = (await successes()) - before;
  const seconds = (ended - started) / 1000;
  const load = await meter(Math.max(1, delivered));
  const mem = await memory();
  const first: number[] = [];
  const second: number[] = [];
  const signed: number[] = [];
  let complete = 0;
  let censored = 0;
  for (const list of attempts.values()) {
    list.sort((x, y) => x[0] - y[0]);
    if (list.length >= 3) complete++;
    for (let n = 1; n < 3; n++) {
      const previous = list[n - 1];
      if (!previous) break;
      const arrived = list[n]?.[0];
      const off = (arrived ?? ended) - previous[1] - EXPECTED_GAPS_MS[n - 1]!;
      if (arrived === undefined) {
        // Not come yet: late by at least `off` if the wait has passed its due time, undecided otherwise.
        if (off <= 0) break;
        censored++;
      }
      signed.push(off);
      (n === 1 ? first : second).push(Math.abs(off));
    }
  }
  const result: RetryGaps = {
    deliveries: RETRY_EVENTS,
    seen: attempts.size,
    complete,
    censored,
    first: ascending(first),
    second: ascending(second),
    signed: ascending(signed),
    rate: delivered / seconds,
    load,
    memory: mem,
  };
  const line = (xs: number[]): string =>
    `${xs.length} gaps, |gap − expected| p50 ${ms(pct(xs, 50))} ms, p99 ${ms(pct(xs, 99))} ms, max ${ms(xs[xs.length - 1])} ms, ` +
    `${xs.filter((x) => x > RETRY_TOLERANCE_MS).length} beyond ${RETRY_TOLERANCE_MS} ms`;
  console.log(
    `  retry precision: ${RETRY_EVENTS} events to ${tenants.length} failing webhooks (500 at once) at ${RETRY_RATE}/s while the fleet saturates the dispatcher ` +
      `(${Math.round(result.rate)} deliveries/s to it meanwhile); ${attempts.size} deliveries had their first attempt, ${complete} their 3 attempts` +
      `${complete < RETRY_EVENTS ? ` (INCOMPLETE ${RETRY_WAIT_SECONDS} s after the last event: ${censored} gaps past due counted as late as the wait, a lower bound)` : ''}`,
  );
  console.log(`    attempt 1 → 2 (expected 1 s after attempt 1's answer): ${line(first)}`);
  console.log(`    attempt 2 → 3 (expected 2 s): ${line(second)}`);
  console.log(
    `    both: p99 ${ms(pct(ascending([...first, ...second]), 99))} ms; gap − expected (late > 0) p1 ${ms(pct(signed, 1))} ms, p50 ${ms(pct(signed, 50))} ms, ` +
      `p99 ${ms(pct(signed, 99))} ms; ${memoryText(mem)}`,
  );
  return result;
}
