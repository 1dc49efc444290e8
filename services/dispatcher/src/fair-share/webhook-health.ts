/**
 * A webhook's health, learnt from its attempts as their slots are given back: a failure score over
 * its last attempts, its average duration, and whether its median answer is slow. A webhook that
 * fails or answers slowly is degraded, and the limiter holds it to fewer slots (the rules in
 * webhook-slots.limiter.ts).
 */

/** What a slot's release says of its attempt. */
export interface SlotOutcome {
  ok: boolean;
  durationMs: number;
}

/** Weight of the newest attempt in a webhook's failure score and its average duration. */
const ALPHA = 0.3;
/** Degraded at or above this score (two failures in a row from a clean record), healthy again below the other. */
const DEGRADE_AT = 0.5;
const RECOVER_BELOW = 0.2;
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
/**
 * A degraded webhook whose attempts take less than this on average holds a slot no longer than a
 * slow healthy receiver does, so it is not held to the degraded budget: a fifth of the 5 s deadline
 * the budget is for.
 */
const QUICK_ATTEMPT_MS = 1000;

export interface WebhookHealth {
  score: number;
  /** Durations of its last SLOW_WINDOW attempts, oldest first. */
  durations: number[];
  /** How many of those took longer than SLOW_ANSWER_MS: the median is over it when they are at least half. */
  slowAnswers: number;
  degraded: boolean;
  /** Average duration of its attempts; undefined until the first ends. */
  avgMs: number | undefined;
}

/** Its attempts end quickly on average (known once one has ended), failed or not. */
export const isQuick = (h: WebhookHealth): boolean => h.avgMs !== undefined && h.avgMs < QUICK_ATTEMPT_MS;

/** Learns from one attempt; true when that made the webhook degraded, or healthy again. */
export function learnFrom(h: WebhookHealth, outcome: SlotOutcome): boolean {
  h.avgMs = h.avgMs === undefined ? outcome.durationMs : h.avgMs + ALPHA * (outcome.durationMs - h.avgMs);
  h.score = h.score * (1 - ALPHA) + (outcome.ok ? 0 : ALPHA);
  h.durations.push(outcome.durationMs);
  if (outcome.durationMs > SLOW_ANSWER_MS) h.slowAnswers++;
  if (h.durations.length > SLOW_WINDOW && h.durations.shift()! > SLOW_ANSWER_MS) h.slowAnswers--;
  const failing = h.degraded ? h.score >= RECOVER_BELOW : h.score >= DEGRADE_AT;
  const degraded = failing || isSlow(h);
  if (degraded === h.degraded) return false;
  h.degraded = degraded;
  return true;
}

/**
 * Its median answer over its last attempts (the upper one of an even count) is slower than
 * SLOW_ANSWER_MS: of n durations, at least n - floor(n / 2) are. Counted as they come rather than
 * sorted on every release, which cost a copy and a sort per attempt.
 */
function isSlow(h: WebhookHealth): boolean {
  const n = h.durations.length;
  return n >= MIN_SLOW_SAMPLES && h.slowAnswers >= n - Math.floor(n / 2);
}
