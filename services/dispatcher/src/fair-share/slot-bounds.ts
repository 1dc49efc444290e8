/**
 * The limiter's bounds, all derived from the pool's size, which the governor may change while sends
 * are in flight: a webhook's and a company's share (unless the operator fixed them), the degraded
 * webhooks' cap and budget, the reserve kept for webhooks not yet sending, and how many slow retries
 * may wait for a slot at once.
 */
export interface SlotBounds {
  /** Sends in flight at most, in all. */
  slots: number;
  perWebhook: number;
  perCompany: number;
  /** A degraded webhook's own bound: a quarter of a healthy one's. */
  degradedCap: number;
  /** Slots the degraded webhooks whose attempts are slow may hold together: half the pool. */
  degradedBudget: number;
  /** Slots a webhook already sending leaves free for others' first sends: a tenth of the pool. */
  reserve: number;
  /**
   * Slots a send beyond its shares leaves free (webhook-slots.limiter.ts, work-conserving shares): a
   * quarter of the pool, at least the reserve, for a webhook whose attempts end quickly. A slot lent
   * cannot be taken back before its send ends, so this much stays free for a tenant that comes
   * meanwhile.
   */
  lendHeadroom: number;
  /**
   * The same for a webhook whose attempts are slow or not known yet: half the pool. Its loans come
   * back only after seconds (up to the 5 s deadline) and all at once when they started together, so
   * a tenant that comes meanwhile must find room for more than its first sends; alone it still
   * reaches a healthy webhook's default share however degraded it is.
   */
  slowLendHeadroom: number;
  /**
   * Retries of webhooks not known to be quick that may wait for a slot at once (each holds a
   * worker's job, and may wait long, as a slow webhook's slot frees slowly): a tenth of the pool;
   * the others are deferred.
   */
  slowRetryWaiters: number;
}

/** The shares the operator fixed (DISPATCHER_WEBHOOK_CONCURRENCY, DISPATCHER_COMPANY_CONCURRENCY); unset ones follow the pool. */
export interface FixedShares {
  perWebhook?: number;
  perCompany?: number;
}

export function checkFixedShares(fixed: FixedShares): void {
  if (fixed.perWebhook !== undefined && !(fixed.perWebhook >= 1)) throw new Error('perWebhook must be at least 1');
  if (fixed.perCompany !== undefined && !(fixed.perCompany >= 1)) throw new Error('perCompany must be at least 1');
}

/** Sets every bound of `b` for a pool of `n` slots. */
export function sizeBounds(b: SlotBounds, n: number, fixed: FixedShares): void {
  if (!(Number.isInteger(n) && n >= 1)) throw new Error('slots must be a whole number, at least 1');
  b.slots = n;
  b.perWebhook = Math.min(n, fixed.perWebhook ?? Math.ceil(n / 2));
  b.perCompany = Math.min(n, fixed.perCompany ?? b.perWebhook);
  b.degradedCap = Math.max(1, Math.floor(b.perWebhook / 4));
  b.degradedBudget = Math.max(1, Math.floor(n / 2));
  b.reserve = n <= 2 ? 0 : Math.max(1, Math.ceil(n / 10));
  b.lendHeadroom = n <= 2 ? 0 : Math.max(b.reserve, Math.ceil(n / 4));
  b.slowLendHeadroom = n <= 2 ? 0 : Math.max(b.lendHeadroom, Math.floor(n / 2));
  b.slowRetryWaiters = Math.max(1, Math.ceil(n / 10));
}
