import { DELIVERY_MAX_ATTEMPTS } from '@svc/contracts';

/**
 * The retry rule of a delivery, in one place: how many attempts it has, how long after each failed
 * one the next is due, and how early that attempt's job is queued. The contract (docs/integrators.md,
 * "Receiving webhooks"): at once, then 1 s after the first attempt ended, then 2 s after the second;
 * after the third failure the delivery has failed. The stages ask this module and act on its verdict,
 * so none of them needs another's constants.
 *
 * Only a receiver's failure spends an attempt. BullMQ's own retries of a job (its options in
 * @svc/contracts' job catalog) are for Postgres or Redis failing around the send, and count none.
 */

/**
 * A retry's job comes out of the delayed set this long before the attempt is due, and the attempt
 * waits for its time in the process (`waitBeforeSend`): under saturation the queue's promotion and
 * the pipeline's reads made retries late, and the lead absorbs that. It costs a worker's job (not a
 * send slot) for that long.
 */
export const RETRY_LEAD_MS = 300;

/** The wait after the end of attempt `attempt` before the next one: 1 s, then 2 s. */
export const retryDelayMs = (attempt: number): number => 1000 * 2 ** (attempt - 1);

/**
 * What comes after an attempt: the delivery has ended (`estado` as recorded), or attempt `attempt`
 * is due at `dueAt` (ms since the epoch) and the delivery stays `pendiente`.
 */
export type RetryVerdict = { kind: 'final'; estado: 'exitosa' | 'fallida' } | { kind: 'retry'; estado: 'pendiente'; attempt: number; dueAt: number };

// The final verdicts are shared: a success, the common case, allocates nothing here.
const SUCCEEDED: RetryVerdict = { kind: 'final', estado: 'exitosa' };
const FAILED: RetryVerdict = { kind: 'final', estado: 'fallida' };

/** The verdict on attempt `attempt`, which ended at `endedAt` (ms since the epoch), `ok` or not. */
export function verdictOf(attempt: number, ok: boolean, endedAt: number): RetryVerdict {
  if (ok) return SUCCEEDED;
  if (attempt >= DELIVERY_MAX_ATTEMPTS) return FAILED;
  return { kind: 'retry', estado: 'pendiente', attempt: attempt + 1, dueAt: endedAt + retryDelayMs(attempt) };
}

/** A retry (attempt 2 or later): due at a time the contract fixes, which other tenants must not make late. */
export const isRetry = (attempt: number): boolean => attempt > 1;

/**
 * How long an attempt whose job came early waits before it is sent: until its due time, never
 * longer than the lead (another host's clock may differ). 0 or less: send now.
 */
export const waitBeforeSend = (dueAt: number | undefined): number => (dueAt === undefined ? 0 : Math.min(dueAt - Date.now(), RETRY_LEAD_MS));

/** The delay to queue a retry's job with: the lead before its due time, or at once when that has passed. */
export const queueDelayFor = (dueAt: number): number => Math.max(0, dueAt - RETRY_LEAD_MS - Date.now());
