import { performance, type EventLoopUtilization } from 'node:perf_hooks';

/**
 * The dispatcher's in-flight limit when the operator has not fixed one (docs/decisions/0007):
 * a send that waits on its receiver costs a slot and a little memory, no CPU, so a pool sized for
 * receivers that answer at once caps throughput at `slots / latency` when they take their time.
 * Once a second the governor looks at how full the send pool was and how busy the main thread was:
 * - the pool was full, or refused sends for want of room, and the thread was mostly idle: sends
 *   are waiting on receivers, so it grows (doubling while the thread is nearly idle, a quarter more
 *   as it gets busier);
 * - the thread was nearly always busy: more sends would only queue for the CPU, so it shrinks;
 * - the pool has stayed mostly empty for a while: it eases back towards its floor.
 * It never leaves [floor, ceiling]: the floor is DISPATCHER_CONCURRENCY's default, the ceiling
 * DISPATCHER_MAX_IN_FLIGHT, which bounds the memory the sends can take.
 */

/** A sample of how full the pool is, this often; the decision is taken over DECIDE_EVERY of them. */
const SAMPLE_MS = 100;
const DECIDE_EVERY = 10;
/** The limit counts as reached when its average use over a decision is at least this share of it. */
const FULL_AT = 0.75;
/** Below this main-thread busy share a full pool doubles (the CPU has room for twice the sends). */
const DOUBLE_BELOW = 0.4;
/** Below this, a full pool grows by a quarter; above it, it holds: close to the CPU's limit, more sends add only latency. */
const GROW_BELOW = 0.85;
/** Above this the thread is the bottleneck: the pool shrinks by SHRINK_BY. */
const SHRINK_ABOVE = 0.95;
const SHRINK_BY = 0.8;
/** A pool used under this share for IDLE_DECISIONS decisions in a row eases back by SHRINK_BY. */
const IDLE_BELOW = 0.25;
const IDLE_DECISIONS = 30;

export interface PoolReading {
  /** Average sends in flight over the decision, as a share of the limit. */
  used: number;
  /** Sends the pool refused over the decision for want of room a larger pool would give. */
  refused: number;
  /** Share of the decision the main thread was busy (event loop utilization). */
  busy: number;
}

export interface GovernorBounds {
  floor: number;
  ceiling: number;
}

/** The next limit, from the current one and what the last decision saw; `idleDecisions` counts the mostly empty ones before it. */
export function nextLimit(limit: number, reading: PoolReading, bounds: GovernorBounds, idleDecisions = 0): number {
  const clamp = (n: number): number => Math.max(bounds.floor, Math.min(bounds.ceiling, Math.round(n)));
  if (reading.busy > SHRINK_ABOVE) return clamp(limit * SHRINK_BY);
  if (reading.used >= FULL_AT || reading.refused > 0) {
    if (reading.busy < DOUBLE_BELOW) return clamp(limit * 2);
    if (reading.busy < GROW_BELOW) return clamp(Math.max(limit + 1, limit * 1.25));
    return limit;
  }
  if (reading.used < IDLE_BELOW && idleDecisions + 1 >= IDLE_DECISIONS) return clamp(limit * SHRINK_BY);
  return limit;
}

export interface InFlightGovernorOptions extends GovernorBounds {
  /**
   * How much of the limit is in use now, as a share: the sends in flight, or the workers' jobs
   * (which hold a send's slot only while it is on the wire, and wait for their record around it),
   * whichever is fuller.
   */
  used(): number;
  /** Sends refused so far for want of room (a running count). */
  refusals(): number;
  /** Makes the limit this: the send pool and the workers' concurrency follow. */
  apply(limit: number): void;
  /** Told each change, with what the decision saw. */
  onChange?(limit: number, previous: number, reading: PoolReading): void;
}

export interface InFlightGovernor {
  limit(): number;
  start(): void;
  stop(): void;
}

export function createInFlightGovernor(options: InFlightGovernorOptions): InFlightGovernor {
  let limit = options.floor;
  let timer: NodeJS.Timeout | undefined;
  let samples = 0;
  let usedSum = 0;
  let idleDecisions = 0;
  let elu: EventLoopUtilization = performance.eventLoopUtilization();
  let refusedBefore = 0;

  function decide(): void {
    const now = performance.eventLoopUtilization();
    const refusals = options.refusals();
    const reading = { used: usedSum / samples, refused: refusals - refusedBefore, busy: performance.eventLoopUtilization(now, elu).utilization };
    elu = now;
    refusedBefore = refusals;
    samples = 0;
    usedSum = 0;
    const next = nextLimit(limit, reading, options, idleDecisions);
    idleDecisions = reading.used < IDLE_BELOW && reading.refused === 0 && next === limit ? idleDecisions + 1 : 0;
    if (next === limit) return;
    const previous = limit;
    limit = next;
    options.apply(limit);
    options.onChange?.(limit, previous, reading);
  }

  return {
    limit: () => limit,
    start() {
      if (timer || options.ceiling <= options.floor) return;
      elu = performance.eventLoopUtilization();
      refusedBefore = options.refusals();
      timer = setInterval(() => {
        usedSum += options.used();
        samples += 1;
        if (samples >= DECIDE_EVERY) decide();
      }, SAMPLE_MS);
      // The governor must never keep the process alive on its own.
      timer.unref();
    },
    stop() {
      if (timer) clearInterval(timer);
      timer = undefined;
    },
  };
}
