import { checkFixedShares, sizeBounds, type FixedShares, type SlotBounds } from './slot-bounds';
import { isQuick, learnFrom, type SlotOutcome, type WebhookHealth } from './webhook-health';

/**
 * Fair sharing of a dispatcher's send slots between companies, then between a company's webhooks,
 * so that no tenant stalls another.
 *
 * BullMQ's open-source worker has one concurrency for the whole queue (per-group limits are a
 * BullMQ Pro feature), so the sharing is done here, around the send only: each worker (events,
 * whose jobs make first attempts, and deliveries, retries) still takes its own jobs at once
 * (`DISPATCHER_CONCURRENCY`, twice that for deliveries), and a send whose webhook has no room
 * either waits here for a few milliseconds (a healthy, fast webhook's slot frees soon) or is
 * deferred until its estimated turn: the caller records that due time in Postgres, where the
 * deferral scheduler finds it (reconcile/deferral.scheduler.ts), without spending an attempt.
 *
 * Every share below is work-conserving (issue 41): it binds only while some webhook under all its
 * own shares wants a slot (waits here, or has deferred jobs still ahead), and then at once, for every
 * send not yet started. Otherwise a webhook or company beyond its shares, healthy or degraded, may
 * borrow any free slot but the last `lendHeadroom` (a quarter of the pool; half of it for a webhook
 * whose attempts are slow or not known yet): a send cannot be taken back before it ends, so that
 * much stays free for a tenant that comes meanwhile, and the slots that free after it go first to
 * whoever is under its shares. As in deficit round robin or weighted
 * fair queueing, the shares decide who goes first when several wait, never whether an idle slot may
 * be used: a slow but healthy receiver alone (a 4 s 2xx is within the contract) drains its backlog
 * at the pool's pace rather than at a quarter of its share.
 *
 * The rules, each for a reason:
 * - A company holds at most `perCompany` slots (DISPATCHER_COMPANY_CONCURRENCY), whatever its number
 *   of webhooks: the tenant is the company, and one with 20 slow or dead webhooks must leave the
 *   others their share. A webhook whose company is not given is a company of its own.
 * - A webhook holds at most `perWebhook` slots (DISPATCHER_WEBHOOK_CONCURRENCY), so one busy
 *   webhook cannot take its company's whole share.
 * - A webhook whose recent attempts failed or whose answers are slow is degraded (webhook-health.ts):
 *   it holds at most a quarter of its bound, and the degraded webhooks whose attempts are slow
 *   together at most half the pool, shared equally between the companies that hold degraded slots
 *   (one alone may use all of it; a second halves it, and so on). A dead endpoint's attempts last
 *   the full 5 s, so slots are what it costs the others; healthy webhooks always keep half, but for
 *   the brief slots of quick failures. A failure that ends quickly gives its slot back as soon as a
 *   healthy answer does: held to the budget, it was deferred again every MIN_DEFER_MS until a dead
 *   endpoint's attempt ended, and its retries came seconds late. It recovers after a few successes.
 * - A webhook already sending needs more than a reserve of free slots to take another; its first
 *   slot needs only one. So a tenant that sends now and then always finds a slot at once, even
 *   while another fills the pool before anyone knows its endpoint is dead.
 * - A retry (attempt 2 or 3) is due at a time the contract fixes (1 s, then 2 s after the previous
 *   attempt ended: docs/integrators.md), so other tenants must not make it late; its own webhook's
 *   bound still holds (the spacing is kept whenever the webhook itself has room). When only the pool
 *   or the degraded budget stands in its way it waits here, ahead of every other job, for the next
 *   slot that frees, rather than being deferred (a deferral lasts at least MIN_DEFER_MS and a trip
 *   through Postgres and the queue; for a slow webhook, its average attempt, up to the 5 s deadline).
 *   A quick webhook's retry goes first and may take the reserve: it gives the slot back at once, to
 *   the next in line.
 */

export type SlotState = 'healthy' | 'degraded';
export type DeferReason = 'webhook_limit' | 'company_limit' | 'degraded_limit' | 'pool_reserve';

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
   * Slots degraded webhooks hold beyond their shares, lent because nobody under theirs wanted them:
   * the governor does not count them as demand, so a dead endpoint alone never grows the pool.
   */
  lentToDegraded(): number;
  /**
   * Sends refused so far (waited or deferred) by a bound a larger pool would widen: the pool's
   * reserve, and a healthy webhook's or company's share where it follows the pool. A degraded
   * webhook's refusals do not count: a bigger pool must not grow a dead endpoint's share.
   */
  refusals(): number;
  /**
   * Makes the pool this size (concurrency/in-flight.governor.ts): the shares that follow the pool
   * (the webhook's and company's when not set, the degraded budget, the reserve) follow it. Sends
   * already in flight are not cut short: a smaller pool admits no more until enough of them end.
   */
  resize(slots: number): void;
  /** Sends every waiter away (deferred) so the worker can stop. */
  close(): void;
}

/** A webhook whose attempts have not ended yet: its deferrals assume a fast receiver until they do. */
const UNKNOWN_DURATION_MS = 50;
/** Shortest deferral: less would only churn the queue. */
const MIN_DEFER_MS = 20;
/** Forget a webhook idle this long (its health starts afresh). */
const IDLE_FORGET_MS = 10 * 60_000;
/**
 * Longest a retry waits here for a slot before it is deferred: past the contract's tolerance it is
 * late already, and the wait holds one of the worker's jobs.
 */
const RETRY_WAIT_MS = 1000;
/**
 * Longest a healthy webhook's send waits here for a slot of a full pool. A slot frees whenever any
 * send ends, so the wait is short in steady state; but when the governor shrinks the pool by a fifth
 * no slot is free until that many sends have ended, which to slow receivers takes longer than
 * maxLocalWaitMs, and a wait that short deferred many of their sends once (each a trip through
 * Postgres and the delivery queue). As long as a retry's wait.
 */
const POOL_WAIT_MS = 1000;

interface CompanyRecord {
  inFlight: number;
  /** Of those, slots taken while degraded (what its share of the degraded budget counts). */
  degradedInFlight: number;
}

interface WebhookRecord extends WebhookHealth {
  company: CompanyRecord;
  companyId: string;
  inFlight: number;
  /**
   * Due times of its deferred jobs, roughly in order (each is put after those before it): the
   * ones still ahead are its backlog. Pruned from the front as they come due.
   */
  deferred: number[];
  /**
   * Its deferral schedule: the turn given to the last job deferred (see defer). The next one comes a
   * slot's worth later (its attempts' length ÷ the slots it may use), so a backlog comes back at
   * the pace its slots free rather than in clumps.
   */
  nextTurn: number;
  /** When its sends in flight started, oldest first (roughly: they are taken off in that order). */
  started: number[];
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

/** The limiter's state: its bounds (which follow the pool's size), the webhooks and companies it knows, its waiters. */
interface Pool extends SlotBounds {
  readonly now: () => number;
  readonly maxLocalWaitMs: number;
  readonly maxPoolWaitMs: number;
  readonly maxDeferMs: number;
  readonly fixed: FixedShares;
  readonly onStateChange: SlotLimiterOptions['onStateChange'];
  readonly webhooks: Map<string, WebhookRecord>;
  readonly companies: Map<string, CompanyRecord>;
  readonly held: Record<SlotState, number>;
  /**
   * Companies holding degraded slots now: counted as slots are taken and given back, since every
   * degraded webhook's admission asks (degradedShareOf) and a walk of all companies cost as much.
   */
  degradedHolders: number;
  waiters: Waiter[];
  /** Webhooks that had jobs deferred: those with some still ahead are waiting too (see someoneWants). */
  readonly backlogged: Set<WebhookRecord>;
  /** Slots held beyond their shares by degraded webhooks (lentToDegraded). */
  lentDegraded: number;
  /** someoneWants, computed at most once per admission or wake (it walks the waiters); undefined: not yet. */
  wantsMemo: boolean | undefined;
  refusals: number;
  lastSweep: number;
}

export function createWebhookSlots(options: SlotLimiterOptions): WebhookSlots {
  const pool = openPool(options);
  return {
    acquire: (id, { retry = false, companyId } = {}) => admit(pool, id, companyId, retry),
    stats: () => statsOf(pool),
    inFlight: () => total(pool),
    refusals: () => pool.refusals,
    limit: () => pool.slots,
    lentToDegraded: () => pool.lentDegraded,
    resize(n) {
      if (n === pool.slots) return;
      sizeBounds(pool, n, pool.fixed);
      wake(pool);
    },
    close: () => sendAllAway(pool),
  };
}

function openPool(options: SlotLimiterOptions): Pool {
  const fixed: FixedShares = { perWebhook: options.perWebhook, perCompany: options.perCompany };
  checkFixedShares(fixed);
  const now = options.now ?? Date.now;
  const pool: Pool = {
    slots: 0,
    perWebhook: 0,
    perCompany: 0,
    degradedCap: 0,
    degradedBudget: 0,
    reserve: 0,
    lendHeadroom: 0,
    slowLendHeadroom: 0,
    slowRetryWaiters: 0,
    now,
    maxLocalWaitMs: options.maxLocalWaitMs ?? 100,
    maxPoolWaitMs: options.maxPoolWaitMs ?? POOL_WAIT_MS,
    maxDeferMs: options.maxDeferMs ?? 30_000,
    fixed,
    onStateChange: options.onStateChange,
    webhooks: new Map(),
    companies: new Map(),
    held: { healthy: 0, degraded: 0 },
    degradedHolders: 0,
    waiters: [],
    backlogged: new Set(),
    lentDegraded: 0,
    wantsMemo: undefined,
    refusals: 0,
    lastSweep: now(),
  };
  sizeBounds(pool, options.slots, fixed);
  return pool;
}

const total = (pool: Pool): number => pool.held.healthy + pool.held.degraded;
const capOf = (pool: Pool, w: WebhookRecord): number => Math.min(w.degraded ? pool.degradedCap : pool.perWebhook, pool.perCompany);
const atOwnBound = (pool: Pool, w: WebhookRecord): boolean => w.inFlight >= capOf(pool, w);
/** A refusal a larger pool would not have made (see WebhookSlots.refusals). */
const widens = (pool: Pool, reason: DeferReason): boolean =>
  reason === 'pool_reserve' || (reason === 'webhook_limit' && pool.fixed.perWebhook === undefined) || (reason === 'company_limit' && pool.fixed.perCompany === undefined);

/**
 * The admission of one send: a slot now, or a wait here, or a deferral. Waiting here holds one of
 * the worker's jobs, so only a send whose slot frees soon waits.
 */
function admit(pool: Pool, id: string, companyId: string | undefined, retry: boolean): Promise<Admission> {
  sweep(pool);
  pool.wantsMemo = undefined;
  const w = recordOf(pool, id, companyId);
  const reason = blocked(pool, w, retry);
  if (reason === null) return Promise.resolve({ slot: take(pool, id, w) });
  if (!w.degraded && widens(pool, reason)) pool.refusals++;
  // Only the pool, the degraded budget or its company's share (which other webhooks of the
  // company, or other companies' degraded ones, fill) stand in this retry's way: it waits for
  // the next slot, first in line.
  if (retry && !atOwnBound(pool, w) && (isQuick(w) || slowRetriesWaiting(pool) < pool.slowRetryWaiters)) return waitHere(pool, id, w, true, RETRY_WAIT_MS, reason);
  // Of the others:
  // - never one whose attempts have not ended yet (a dead tenant's backlog, waiting here, held
  //   the jobs a healthy tenant's sends needed);
  // - a degraded one only if it fails quickly and is below its own bound (deferred, its first
  //   attempts lost every race for a full pool, and many were never made);
  // - for its own bound, only if its turn comes within maxLocalWaitMs; for the pool alone,
  //   always, for up to maxPoolWaitMs: the next slot to free anywhere is soon, and deferred, it
  //   came back to a pool as full, at the cost of more trips through the queue.
  if ((w.degraded && (!isQuick(w) || atOwnBound(pool, w))) || w.avgMs === undefined) return Promise.resolve(defer(pool, w, reason));
  if (reason !== 'pool_reserve' && turnIn(pool, w) > pool.maxLocalWaitMs) return Promise.resolve(defer(pool, w, reason));
  return waitHere(pool, id, w, retry, reason === 'pool_reserve' ? pool.maxPoolWaitMs : pool.maxLocalWaitMs, reason);
}

/** A company's equal part of the degraded budget: between those holding degraded slots, and itself. */
function degradedShareOf(pool: Pool, c: CompanyRecord): number {
  const holders = pool.degradedHolders + (c.degradedInFlight > 0 ? 0 : 1);
  return Math.max(1, Math.ceil(pool.degradedBudget / holders));
}

function recordOf(pool: Pool, id: string, companyId: string | undefined): WebhookRecord {
  let w = pool.webhooks.get(id);
  // A webhook never changes company; the key is its own id until it is told one.
  const key = companyId === undefined ? `webhook:${id}` : `company:${companyId}`;
  if (w && w.inFlight === 0 && w.companyId !== key) {
    pool.webhooks.delete(id);
    pool.backlogged.delete(w);
    w = undefined;
  }
  if (!w) {
    let company = pool.companies.get(key);
    if (!company) {
      company = { inFlight: 0, degradedInFlight: 0 };
      pool.companies.set(key, company);
    }
    w = { company, companyId: key, inFlight: 0, score: 0, durations: [], slowAnswers: 0, degraded: false, avgMs: undefined, deferred: [], nextTurn: 0, started: [], lastUsed: pool.now() };
    pool.webhooks.set(id, w);
  }
  return w;
}

/** The share this webhook's next send would pass (its own bound, its company's, the degraded budget), or null when it is under all of them. */
function shareLimit(pool: Pool, w: WebhookRecord): DeferReason | null {
  if (atOwnBound(pool, w)) return w.degraded ? 'degraded_limit' : 'webhook_limit';
  if (w.company.inFlight >= pool.perCompany) return 'company_limit';
  if (w.degraded && !isQuick(w) && (pool.held.degraded >= pool.degradedBudget || w.company.degradedInFlight >= degradedShareOf(pool, w.company))) return 'degraded_limit';
  return null;
}

/**
 * Some webhook under all its shares wants a slot: one of its jobs waits here, or it has deferred
 * jobs still ahead. Then every share binds (a webhook beyond its shares never counts itself).
 */
function someoneWants(pool: Pool): boolean {
  if (pool.wantsMemo !== undefined) return pool.wantsMemo;
  let wants = pool.waiters.some((x) => shareLimit(pool, x.record) === null);
  if (!wants) {
    const at = pool.now();
    for (const v of pool.backlogged) {
      if (deferredAhead(v, at) === 0) pool.backlogged.delete(v);
      else if (shareLimit(pool, v) === null) {
        wants = true;
        break;
      }
    }
  }
  pool.wantsMemo = wants;
  return wants;
}

/** Why this webhook cannot start a send (a retry: `retry`) now, or null when it can. */
function blocked(pool: Pool, w: WebhookRecord, retry: boolean): DeferReason | null {
  // Beyond a share, a slot is lent only if it leaves the headroom free and nobody under theirs wants one.
  const share = shareLimit(pool, w);
  if (share !== null && (total(pool) >= pool.slots - headroomOf(pool, w) || someoneWants(pool))) return share;
  // A quick webhook's retry may take the reserve: it gives the slot back at once.
  if (total(pool) >= (w.inFlight > 0 && !(retry && isQuick(w)) ? pool.slots - pool.reserve : pool.slots)) return 'pool_reserve';
  return null;
}

function take(pool: Pool, id: string, w: WebhookRecord): Slot {
  const state: SlotState = w.degraded ? 'degraded' : 'healthy';
  const lent = state === 'degraded' && shareLimit(pool, w) !== null;
  if (lent) pool.lentDegraded++;
  w.inFlight++;
  w.started.push(pool.now());
  w.company.inFlight++;
  if (state === 'degraded' && w.company.degradedInFlight++ === 0) pool.degradedHolders++;
  w.lastUsed = pool.now();
  pool.held[state]++;
  let released = false;
  return {
    state,
    release(outcome) {
      if (released) return;
      released = true;
      if (lent) pool.lentDegraded--;
      giveBack(pool, id, w, state, outcome);
    },
  };
}

/** A slot given back: the counts it held, what its attempt says of the webhook, and the waiters it lets in. */
function giveBack(pool: Pool, id: string, w: WebhookRecord, state: SlotState, outcome: SlotOutcome): void {
  w.inFlight--;
  w.started.shift();
  w.company.inFlight--;
  if (state === 'degraded' && --w.company.degradedInFlight === 0) pool.degradedHolders--;
  pool.held[state]--;
  if (learnFrom(w, outcome)) {
    // A recovered webhook's deferred jobs come back at their times; its new ones are not held back.
    if (!w.degraded) w.deferred = [];
    pool.onStateChange?.(id, w.degraded ? 'degraded' : 'healthy', w.score);
  }
  wake(pool);
}

/** The order waiters are admitted in: quick webhooks' retries, then the other retries, then the rest. */
const rankOf = (x: Waiter): number => (x.retry ? (isQuick(x.record) ? 0 : 1) : 2);

/**
 * Admits waiters as far as the rules let them start: quick webhooks' retries first (each gives its
 * slot back at once, to the next), then the other retries, then the rest, each in arrival order.
 */
function wake(pool: Pool): void {
  if (pool.waiters.length === 0) return;
  // Computed once for the whole walk (it walks the waiters itself): one admitted here may leave it stale until the next wake.
  pool.wantsMemo = undefined;
  const admitted = new Set<Waiter>();
  for (let pass = 0; pass <= 2; pass++) {
    for (const waiter of pool.waiters) {
      // A full pool admits no one: with many waiting, every release would otherwise look at all of them.
      if (total(pool) >= pool.slots) break;
      if (rankOf(waiter) !== pass || blocked(pool, waiter.record, waiter.retry) !== null) continue;
      clearTimeout(waiter.timer);
      admitted.add(waiter);
      waiter.resolve({ slot: take(pool, waiter.id, waiter.record) });
    }
  }
  if (admitted.size > 0) pool.waiters = pool.waiters.filter((x) => !admitted.has(x));
}

/** Waits here for a slot, at most `ms`, then is deferred. */
function waitHere(pool: Pool, id: string, w: WebhookRecord, retry: boolean, ms: number, reason: DeferReason): Promise<Admission> {
  return new Promise<Admission>((resolve) => {
    const waiter: Waiter = {
      id,
      record: w,
      retry,
      resolve,
      timer: setTimeout(() => {
        pool.waiters = pool.waiters.filter((x) => x !== waiter);
        pool.wantsMemo = undefined;
        resolve(defer(pool, w, blocked(pool, w, retry) ?? reason));
      }, ms),
    };
    pool.waiters.push(waiter);
  });
}

const slowRetriesWaiting = (pool: Pool): number => pool.waiters.reduce((n, x) => n + (x.retry && !isQuick(x.record) ? 1 : 0), 0);

/** Its deferred jobs still ahead; the count is an estimate, as their times are only roughly ordered. */
function deferredAhead(w: WebhookRecord, at: number): number {
  let due = 0;
  while (due < w.deferred.length && w.deferred[due]! <= at) due++;
  if (due > 0) w.deferred.splice(0, due);
  return w.deferred.length;
}

/**
 * Slots this webhook may expect to use for its backlog: its own bound, or, while nobody under their
 * shares wants a slot, what it may borrow (the pool but the headroom and the others' sends).
 */
function capacityOf(pool: Pool, w: WebhookRecord): number {
  const own = capOf(pool, w);
  if (someoneWants(pool)) return own;
  return Math.max(own, pool.slots - headroomOf(pool, w) - (total(pool) - w.inFlight));
}

/** What a loan to this webhook must leave free: less when its attempts end quickly (it gives the slots back soon). */
const headroomOf = (pool: Pool, w: WebhookRecord): number => (isQuick(w) ? pool.lendHeadroom : pool.slowLendHeadroom);

/** When this webhook's turn is likely to come: the jobs ahead of it, its slots and its attempts' length. */
function turnIn(pool: Pool, w: WebhookRecord): number {
  let ahead = deferredAhead(w, pool.now());
  for (const x of pool.waiters) if (x.record === w) ahead++;
  return Math.ceil((ahead + 1) / capacityOf(pool, w)) * (w.avgMs ?? UNKNOWN_DURATION_MS);
}

/**
 * Deferred until its turn in its webhook's schedule, as in fair queueing's virtual finish times:
 * the first job of a backlog when its webhook's oldest send should end (or, none in flight, after
 * one attempt's length), each next one a slot's worth (the attempts' length ÷ the slots it may use)
 * after the one before. A turn past maxDeferMs comes back at maxDeferMs to look again, off the
 * schedule (jittered: jobs deferred together must not come back in one instant): a schedule that
 * counted it would push every later job back once more each time it came early.
 */
function defer(pool: Pool, w: WebhookRecord, reason: DeferReason): Admission {
  const at = pool.now();
  const avg = w.avgMs ?? UNKNOWN_DURATION_MS;
  const gap = avg / capacityOf(pool, w);
  const first = (w.started[0] ?? at) + avg;
  const turn = Math.max(at + MIN_DEFER_MS, at + gap, w.nextTurn > at ? w.nextTurn + gap : first);
  let deferUntil: number;
  if (turn - at <= pool.maxDeferMs) {
    w.nextTurn = turn;
    deferUntil = Math.round(turn);
  } else {
    deferUntil = at + Math.round(pool.maxDeferMs * (1 - Math.random() * 0.2));
  }
  w.deferred.push(deferUntil);
  pool.backlogged.add(w);
  return { deferUntil, reason };
}

/** At most once a minute: forgets the webhooks idle past IDLE_FORGET_MS, and the companies left with none. */
function sweep(pool: Pool): void {
  const at = pool.now();
  if (at - pool.lastSweep < 60_000) return;
  pool.lastSweep = at;
  for (const [id, w] of pool.webhooks) {
    if (w.inFlight === 0 && at - w.lastUsed > IDLE_FORGET_MS && !pool.waiters.some((x) => x.record === w)) {
      pool.webhooks.delete(id);
      pool.backlogged.delete(w);
    }
  }
  const used = new Set<CompanyRecord>();
  for (const w of pool.webhooks.values()) used.add(w.company);
  for (const [key, c] of pool.companies) if (!used.has(c) && c.inFlight === 0) pool.companies.delete(key);
}

function statsOf(pool: Pool): ReturnType<WebhookSlots['stats']> {
  const at = pool.now();
  let ahead = 0;
  let degradedWebhooks = 0;
  for (const w of pool.webhooks.values()) {
    ahead += deferredAhead(w, at);
    if (w.degraded) degradedWebhooks++;
  }
  return { held: { ...pool.held }, waitingHere: pool.waiters.length, deferredAhead: ahead, degradedWebhooks };
}

/** Sends every waiter away, deferred, so the worker can stop. */
function sendAllAway(pool: Pool): void {
  const all = pool.waiters;
  pool.waiters = [];
  pool.wantsMemo = undefined;
  for (const waiter of all) {
    clearTimeout(waiter.timer);
    waiter.resolve(defer(pool, waiter.record, 'pool_reserve'));
  }
}
