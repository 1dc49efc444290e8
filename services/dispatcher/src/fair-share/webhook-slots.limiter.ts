/**
 * Fair sharing of a dispatcher's send slots between companies, then between a company's webhooks,
 * so that no tenant stalls another.
 *
 * BullMQ's open-source worker has one concurrency for the whole queue (per-group limits are a
 * BullMQ Pro feature), so the sharing is done here, around the send only: each worker (events,
 * whose jobs make first attempts, and deliveries, retries) still takes its own jobs at once
 * (`DISPATCHER_CONCURRENCY`, twice that for deliveries), and a send whose webhook has no room
 * either waits here for a few milliseconds (a healthy, fast webhook's slot frees soon) or is put in
 * the deliveries queue's delayed set until its estimated turn (the caller does that, without
 * spending an attempt).
 *
 * The rules, each for a reason:
 * - A company holds at most `perCompany` slots (DISPATCHER_COMPANY_CONCURRENCY), whatever its number
 *   of webhooks: the tenant is the company, and one with 20 slow or dead webhooks must leave the
 *   others their share. A webhook whose company is not given is a company of its own.
 * - A webhook holds at most `perWebhook` slots (DISPATCHER_WEBHOOK_CONCURRENCY), so one busy
 *   webhook cannot take its company's whole share.
 * - A webhook whose recent attempts failed (a failure score over its last attempts) or whose
 *   answers are slow (the median of its last attempts over SLOW_ANSWER_MS, 2xx or not) is degraded:
 *   it holds at most a quarter of its bound, and the degraded webhooks whose attempts are slow
 *   together at most half the pool, shared equally between the companies that hold degraded slots
 *   (one alone may use all of it; a second halves it, and so on). A dead endpoint's attempts last the full 5 s, so slots are what it costs
 *   the others; healthy webhooks always keep half, but for the brief slots of quick failures. A
 *   failure that ends quickly gives its slot back as soon as a healthy answer does: held to the
 *   budget, it was deferred again every ~20 ms until a dead endpoint's attempt ended, and its
 *   retries came seconds late. It recovers after a few successes.
 * - A webhook already sending needs more than a reserve of free slots to take another; its first
 *   slot needs only one. So a tenant that sends now and then always finds a slot at once, even
 *   while another fills the pool before anyone knows its endpoint is dead.
 * - A retry (attempt 2 or 3) is due at a time the contract fixes (1 s, then 2 s after the previous
 *   attempt ended, courier-api.md), so other tenants must not make it late; its own webhook's bound
 *   still holds (the spacing is kept whenever the webhook itself has room). When only the pool or
 *   the degraded budget stands in its way it waits here, ahead of every other job, for the next
 *   slot that frees, rather than being deferred (a deferral lasts at least 20 ms and a trip through
 *   the delayed set; for a slow webhook, its average attempt: about 5 s). A quick webhook's retry
 *   goes first and may take the reserve: it gives the slot back at once, to the next in line.
 */

export type SlotState = 'healthy' | 'degraded';
export type DeferReason = 'webhook_limit' | 'company_limit' | 'degraded_limit' | 'pool_reserve';

export interface SlotOutcome {
  ok: boolean;
  durationMs: number;
}

export interface Slot {
  /** The webhook's state when the slot was taken (what `held()` counts it under). */
  readonly state: SlotState;
  /** Gives the slot back with the attempt's outcome, which feeds the webhook's health. Once. */
  release(outcome: SlotOutcome): void;
}

export type Admission = { slot: Slot } | { deferUntil: number; reason: DeferReason };

export interface AcquireOptions {
  /** The webhook's company (`webhooks.empresa_id`); absent: the webhook is a company of its own. */
  companyId?: string;
  /** A retry (attempt 2 or 3) at its due time: see the rules for retries above. */
  retry?: boolean;
}

export interface SlotLimiterOptions {
  /** Sends in flight in this process, at first: DISPATCHER_CONCURRENCY; the governor may `resize` it. */
  slots: number;
  /** DISPATCHER_WEBHOOK_CONCURRENCY: sends in flight for one webhook in this process. Default: half the pool, whatever its size. */
  perWebhook?: number;
  /** DISPATCHER_COMPANY_CONCURRENCY: sends in flight for one company's webhooks in this process. Default `perWebhook`. */
  perCompany?: number;
  /** Longest a job waits here for its webhook's or company's turn before it is deferred instead. Default 100 ms. */
  maxLocalWaitMs?: number;
  /**
   * Longest a send held back by the pool alone (full, or its reserve) waits here for the next slot
   * before it is deferred. Default POOL_WAIT_MS.
   */
  maxPoolWaitMs?: number;
  /** Longest a deferral lasts: a deferred job looks again at least this often. Default 30 s. */
  maxDeferMs?: number;
  /** Told when a webhook becomes degraded or recovers. */
  onStateChange?: (webhookId: string, state: SlotState, score: number) => void;
  now?: () => number;
}

/** Weight of the newest attempt in a webhook's failure score and its average duration. */
const ALPHA = 0.3;
/** Degraded at or above this score (two failures in a row from a clean record), healthy again below the other. */
const DEGRADE_AT = 0.5;
const RECOVER_BELOW = 0.2;
/** A webhook whose attempts have not ended yet: its deferrals assume a fast receiver until they do. */
const UNKNOWN_DURATION_MS = 50;
/** Shortest deferral: less would only churn the queue. */
const MIN_DEFER_MS = 20;
/**
 * A webhook whose median answer over its last SLOW_WINDOW attempts takes longer than this counts as
 * degraded, though it answers 2xx: it holds a slot 40 times as long as a 50 ms receiver, so at the
 * full bound a few such webhooks fill the pool as surely as dead ones. Two fifths of the
 * 5 s deadline: a receiver that slow is near timing out anyway.
 */
const SLOW_ANSWER_MS = 2000;
/** Attempts whose durations the median is taken over; slowness is judged from MIN_SLOW_SAMPLES on, so one cold start is not enough. */
const SLOW_WINDOW = 5;
const MIN_SLOW_SAMPLES = 3;
/** Forget a webhook idle this long (its health starts afresh). */
const IDLE_FORGET_MS = 10 * 60_000;
/**
 * A degraded webhook whose attempts take less than this on average holds a slot no longer than a
 * slow healthy receiver does, so it is not held to the degraded budget: a fifth of the 5 s deadline
 * the budget is for.
 */
const QUICK_ATTEMPT_MS = 1000;
/**
 * Longest a retry waits here for a slot before it is deferred: past the contract's tolerance it is
 * late already, and the wait holds one of the worker's jobs.
 */
const RETRY_WAIT_MS = 1000;
/**
 * Longest a healthy webhook's send waits here for a slot of a full pool. A slot frees whenever any
 * send ends, so the wait is short in steady state; but when the governor shrinks the pool by a fifth
 * no slot is free until that many sends have ended (about 200 ms at 500 ms receivers), and with a
 * 100 ms wait 45% of the sends to 500 ms receivers were deferred once (a trip through Postgres and
 * the delivery queue each, 3.6 queue scripts per delivery against 2). As long as a retry's wait.
 */
const POOL_WAIT_MS = 1000;

interface CompanyRecord {
  inFlight: number;
  /** Of those, slots taken while degraded (what its share of the degraded budget counts). */
  degradedInFlight: number;
}

interface WebhookRecord {
  company: CompanyRecord;
  companyId: string;
  inFlight: number;
  score: number;
  /** Durations of its last SLOW_WINDOW attempts, oldest first. */
  durations: number[];
  /** How many of those took longer than SLOW_ANSWER_MS: the median is over it when they are at least half. */
  slowAnswers: number;
  degraded: boolean;
  /** Average duration of its attempts; undefined until the first ends. */
  avgMs: number | undefined;
  /**
   * Due times of its deferred jobs, roughly in order (each is put after those before it): the
   * ones still ahead are its backlog. Pruned from the front as they come due.
   */
  deferred: number[];
  lastUsed: number;
}

interface Waiter {
  id: string;
  record: WebhookRecord;
  /** A retry: admitted before the others (see wake). */
  retry: boolean;
  resolve: (admission: Admission) => void;
  timer: NodeJS.Timeout;
}

export interface WebhookSlots {
  /** A slot now, after a short wait here, or the time to come back. */
  acquire(webhookId: string, options?: AcquireOptions): Promise<Admission>;
  /** Slots held by state, jobs waiting here, deferred jobs still ahead, and degraded webhooks. */
  stats(): { held: Record<SlotState, number>; waitingHere: number; deferredAhead: number; degradedWebhooks: number };
  /** Sends in flight now, in all. */
  inFlight(): number;
  /** The pool's size now. */
  limit(): number;
  /**
   * Sends refused so far (waited or deferred) by a bound a larger pool would widen: the pool's
   * reserve, and a healthy webhook's or company's share where it follows the pool. A degraded
   * webhook's refusals do not count: a bigger pool must not grow a dead endpoint's share.
   */
  refusals(): number;
  /**
   * Makes the pool this size (in-flight.governor.ts): the shares that follow the pool (the webhook's
   * and company's when not set, the degraded budget, the reserve) follow it. Sends already in flight
   * are not cut short: a smaller pool admits no more until enough of them end.
   */
  resize(slots: number): void;
  /** Sends every waiter away (deferred) so the worker can stop. */
  close(): void;
}

export function createWebhookSlots(options: SlotLimiterOptions): WebhookSlots {
  const now = options.now ?? Date.now;
  const maxLocalWaitMs = options.maxLocalWaitMs ?? 100;
  const maxPoolWaitMs = options.maxPoolWaitMs ?? POOL_WAIT_MS;
  const maxDeferMs = options.maxDeferMs ?? 30_000;
  if (options.perWebhook !== undefined && !(options.perWebhook >= 1)) throw new Error('perWebhook must be at least 1');
  if (options.perCompany !== undefined && !(options.perCompany >= 1)) throw new Error('perCompany must be at least 1');
  // Every bound below follows the pool's size, which the governor may change while sends are in flight.
  let slots = 0;
  let perWebhook = 0;
  let perCompany = 0;
  let degradedCap = 0;
  let degradedBudget = 0;
  let reserve = 0;
  // Retries of webhooks not known to be quick that may wait here at once (each holds a worker's job,
  // and may wait long, as a slow webhook's slot frees slowly): a tenth of the pool; the others are
  // deferred.
  let slowRetryWaiters = 0;
  function size(n: number): void {
    if (!(Number.isInteger(n) && n >= 1)) throw new Error('slots must be a whole number, at least 1');
    slots = n;
    perWebhook = Math.min(slots, options.perWebhook ?? Math.ceil(slots / 2));
    perCompany = Math.min(slots, options.perCompany ?? perWebhook);
    degradedCap = Math.max(1, Math.floor(perWebhook / 4));
    degradedBudget = Math.max(1, Math.floor(slots / 2));
    reserve = slots <= 2 ? 0 : Math.max(1, Math.ceil(slots / 10));
    slowRetryWaiters = Math.max(1, Math.ceil(slots / 10));
  }
  size(options.slots);

  const webhooks = new Map<string, WebhookRecord>();
  const companies = new Map<string, CompanyRecord>();
  const held: Record<SlotState, number> = { healthy: 0, degraded: 0 };
  // Companies holding degraded slots now: counted as slots are taken and given back, since every
  // degraded webhook's admission asks (degradedShareOf) and a walk of all companies cost as much.
  let degradedHolders = 0;
  let waiters: Waiter[] = [];
  let refusals = 0;
  const widens = (reason: DeferReason): boolean =>
    reason === 'pool_reserve' || (reason === 'webhook_limit' && options.perWebhook === undefined) || (reason === 'company_limit' && options.perCompany === undefined);
  let lastSweep = now();

  const total = (): number => held.healthy + held.degraded;
  const capOf = (w: WebhookRecord): number => Math.min(w.degraded ? degradedCap : perWebhook, perCompany);
  const atOwnBound = (w: WebhookRecord): boolean => w.inFlight >= capOf(w);
  const quick = (w: WebhookRecord): boolean => w.avgMs !== undefined && w.avgMs < QUICK_ATTEMPT_MS;

  /** A company's equal part of the degraded budget: between those holding degraded slots, and itself. */
  function degradedShareOf(c: CompanyRecord): number {
    const holders = degradedHolders + (c.degradedInFlight > 0 ? 0 : 1);
    return Math.max(1, Math.ceil(degradedBudget / holders));
  }

  function recordOf(id: string, companyId: string | undefined): WebhookRecord {
    let w = webhooks.get(id);
    // A webhook never changes company; the key is its own id until it is told one.
    const key = companyId === undefined ? `webhook:${id}` : `company:${companyId}`;
    if (w && w.inFlight === 0 && w.companyId !== key) {
      webhooks.delete(id);
      w = undefined;
    }
    if (!w) {
      let company = companies.get(key);
      if (!company) {
        company = { inFlight: 0, degradedInFlight: 0 };
        companies.set(key, company);
      }
      w = { company, companyId: key, inFlight: 0, score: 0, durations: [], slowAnswers: 0, degraded: false, avgMs: undefined, deferred: [], lastUsed: now() };
      webhooks.set(id, w);
    }
    return w;
  }

  /** Why this webhook cannot start a send (a retry: `retry`) now, or null when it can. */
  function blocked(w: WebhookRecord, retry: boolean): DeferReason | null {
    if (atOwnBound(w)) return w.degraded ? 'degraded_limit' : 'webhook_limit';
    if (w.company.inFlight >= perCompany) return 'company_limit';
    if (w.degraded && !quick(w) && (held.degraded >= degradedBudget || w.company.degradedInFlight >= degradedShareOf(w.company))) return 'degraded_limit';
    // A quick webhook's retry may take the reserve: it gives the slot back at once.
    if (total() >= (w.inFlight > 0 && !(retry && quick(w)) ? slots - reserve : slots)) return 'pool_reserve';
    return null;
  }

  function take(id: string, w: WebhookRecord): Slot {
    const state: SlotState = w.degraded ? 'degraded' : 'healthy';
    w.inFlight++;
    w.company.inFlight++;
    if (state === 'degraded' && w.company.degradedInFlight++ === 0) degradedHolders++;
    w.lastUsed = now();
    held[state]++;
    let released = false;
    return {
      state,
      release(outcome) {
        if (released) return;
        released = true;
        w.inFlight--;
        w.company.inFlight--;
        if (state === 'degraded' && --w.company.degradedInFlight === 0) degradedHolders--;
        held[state]--;
        learn(id, w, outcome);
        wake();
      },
    };
  }

  function learn(id: string, w: WebhookRecord, outcome: SlotOutcome): void {
    w.avgMs = w.avgMs === undefined ? outcome.durationMs : w.avgMs + ALPHA * (outcome.durationMs - w.avgMs);
    w.score = w.score * (1 - ALPHA) + (outcome.ok ? 0 : ALPHA);
    w.durations.push(outcome.durationMs);
    if (outcome.durationMs > SLOW_ANSWER_MS) w.slowAnswers++;
    if (w.durations.length > SLOW_WINDOW && w.durations.shift()! > SLOW_ANSWER_MS) w.slowAnswers--;
    const failing = w.degraded ? w.score >= RECOVER_BELOW : w.score >= DEGRADE_AT;
    const degraded = failing || slow(w);
    if (degraded !== w.degraded) {
      w.degraded = degraded;
      // A recovered webhook's deferred jobs come back at their times; its new ones are not held back.
      if (!degraded) w.deferred = [];
      options.onStateChange?.(id, degraded ? 'degraded' : 'healthy', w.score);
    }
  }

  /**
   * Admits waiters as far as the rules let them start: quick webhooks' retries first (each gives its
   * slot back at once, to the next), then the other retries, then the rest, each in arrival order.
   */
  function wake(): void {
    if (waiters.length === 0) return;
    const admitted = new Set<Waiter>();
    const rank = (x: Waiter): number => (x.retry ? (quick(x.record) ? 0 : 1) : 2);
    for (let pass = 0; pass <= 2; pass++) {
      for (const waiter of waiters) {
        // A full pool admits no one: with many waiting, every release would otherwise look at all of them.
        if (total() >= slots) break;
        if (rank(waiter) !== pass || blocked(waiter.record, waiter.retry) !== null) continue;
        clearTimeout(waiter.timer);
        admitted.add(waiter);
        waiter.resolve({ slot: take(waiter.id, waiter.record) });
      }
    }
    if (admitted.size > 0) waiters = waiters.filter((x) => !admitted.has(x));
  }

  /**
   * Its median answer over its last attempts (the upper one of an even count) is slower than
   * SLOW_ANSWER_MS: of n durations, at least n - floor(n / 2) are. Counted as they come rather than
   * sorted on every release, which cost a copy and a sort per attempt.
   */
  function slow(w: WebhookRecord): boolean {
    const n = w.durations.length;
    return n >= MIN_SLOW_SAMPLES && w.slowAnswers >= n - Math.floor(n / 2);
  }

  /** Its deferred jobs still ahead; the count is an estimate, as their times are only roughly ordered. */
  function deferredAhead(w: WebhookRecord, at: number): number {
    let due = 0;
    while (due < w.deferred.length && w.deferred[due]! <= at) due++;
    if (due > 0) w.deferred.splice(0, due);
    return w.deferred.length;
  }

  /** When this webhook's turn is likely to come: the jobs ahead of it, its slots and its attempts' length. */
  function turnIn(w: WebhookRecord): number {
    let ahead = deferredAhead(w, now());
    for (const x of waiters) if (x.record === w) ahead++;
    return Math.ceil((ahead + 1) / capOf(w)) * (w.avgMs ?? UNKNOWN_DURATION_MS);
  }

  function defer(w: WebhookRecord, reason: DeferReason): Admission {
    // Jitter spreads jobs deferred together, so they do not all come back in the same instant.
    const wait = Math.min(maxDeferMs, Math.max(MIN_DEFER_MS, turnIn(w) * (1 + Math.random() * 0.25)));
    const deferUntil = now() + Math.round(wait);
    w.deferred.push(deferUntil);
    return { deferUntil, reason };
  }

  function sweep(): void {
    const at = now();
    if (at - lastSweep < 60_000) return;
    lastSweep = at;
    for (const [id, w] of webhooks) {
      if (w.inFlight === 0 && at - w.lastUsed > IDLE_FORGET_MS && !waiters.some((x) => x.record === w)) webhooks.delete(id);
    }
    const used = new Set<CompanyRecord>();
    for (const w of webhooks.values()) used.add(w.company);
    for (const [key, c] of companies) if (!used.has(c) && c.inFlight === 0) companies.delete(key);
  }

  /** Waits here for a slot, at most `ms`, then is deferred. */
  function waitHere(id: string, w: WebhookRecord, retry: boolean, ms: number, reason: DeferReason): Promise<Admission> {
    return new Promise<Admission>((resolve) => {
      const waiter: Waiter = {
        id,
        record: w,
        retry,
        resolve,
        timer: setTimeout(() => {
          waiters = waiters.filter((x) => x !== waiter);
          resolve(defer(w, blocked(w, retry) ?? reason));
        }, ms),
      };
      waiters.push(waiter);
    });
  }

  const slowRetriesWaiting = (): number => waiters.reduce((n, x) => n + (x.retry && !quick(x.record) ? 1 : 0), 0);

  return {
    acquire(id, { retry = false, companyId } = {}) {
      sweep();
      const w = recordOf(id, companyId);
      const reason = blocked(w, retry);
      if (reason === null) return Promise.resolve({ slot: take(id, w) });
      if (!w.degraded && widens(reason)) refusals++;
      // Only the pool, the degraded budget or its company's share (which other webhooks of the
      // company, or other companies' degraded ones, fill) stand in this retry's way: it waits for
      // the next slot, first in line.
      if (retry && !atOwnBound(w) && (quick(w) || slowRetriesWaiting() < slowRetryWaiters)) return waitHere(id, w, true, RETRY_WAIT_MS, reason);
      // Waiting here holds one of the worker's jobs, so only a webhook whose slot frees soon waits:
      // - never one whose attempts have not ended yet (a dead tenant's backlog held a healthy
      //   tenant's jobs 3.5 s at p95 when it could);
      // - a degraded one only if it fails quickly and is below its own bound (deferred, its first
      //   attempts lost every race for a full pool: 90 of 200 made in the bench);
      // - for its own bound, only if its turn comes within maxLocalWaitMs; for the pool alone,
      //   always, for up to maxPoolWaitMs: the next slot to free anywhere is soon, and deferred, it
      //   came back to a pool as full (7 queue scripts per delivery with 1% of webhooks never
      //   answering).
      if ((w.degraded && (!quick(w) || atOwnBound(w))) || w.avgMs === undefined) return Promise.resolve(defer(w, reason));
      if (reason !== 'pool_reserve' && turnIn(w) > maxLocalWaitMs) return Promise.resolve(defer(w, reason));
      return waitHere(id, w, retry, reason === 'pool_reserve' ? maxPoolWaitMs : maxLocalWaitMs, reason);
    },
    stats() {
      const at = now();
      let ahead = 0;
      let degradedWebhooks = 0;
      for (const w of webhooks.values()) {
        ahead += deferredAhead(w, at);
        if (w.degraded) degradedWebhooks++;
      }
      return { held: { ...held }, waitingHere: waiters.length, deferredAhead: ahead, degradedWebhooks };
    },
    inFlight: total,
    refusals: () => refusals,
    limit: () => slots,
    resize(n) {
      if (n === slots) return;
      size(n);
      wake();
    },
    close() {
      const all = waiters;
      waiters = [];
      for (const waiter of all) {
        clearTimeout(waiter.timer);
        waiter.resolve(defer(waiter.record, 'pool_reserve'));
      }
    },
  };
}
