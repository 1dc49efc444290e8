import type { Job } from 'bullmq';
import type { DeliveryJob } from '@svc/contracts';
import type { AttemptRecord, WebhookTarget } from '@svc/platform';
import type { AttemptOutcome } from '@svc/webhook-sender';
import type { DeferReason } from '../fair-share/webhook-slots.limiter';
import type { RetryVerdict } from '../retry-policy/delivery-retry.policy';

/**
 * The states of one attempt on its way through the pipeline (delivery.pipeline.ts):
 *
 *   prepare → Ready | Ended
 *   send    → Sent | Deferred        (an attempt made, or put off until its webhook's turn)
 *   record  → Recorded               (its row took it, or another run's had already)
 *   settle  → DeliveryStep           (metrics, log line, the next attempt's job)
 */

/** What became of one attempt of a delivery. `deferred`: its webhook had no free slot, nothing was spent. */
export type DeliveryStep = 'success' | 'retry' | 'failure' | 'duplicate' | 'missing' | 'deferred';

/** A delivery's own job, as its worker runs it (`token`: the worker's lock on it). */
export interface OwnJob {
  job: Job<unknown>;
  token: string | undefined;
}

/** What every state after prepare carries. */
interface Underway {
  delivery: DeliveryJob;
  target: WebhookTarget;
  /** `new`: no row yet (an event's first attempt; the record inserts it). `existing`: the record updates it. */
  row: 'new' | 'existing';
  /** The delivery's own job (a deferral just ends it); null when it has none. */
  ownJob: OwnJob | null;
}

/** Owed an attempt now, with its webhook's target. */
export interface Ready extends Underway {
  stage: 'ready';
}

/** No attempt owed: the delivery or its webhook is gone, the attempt was already made, or the webhook is inactive. */
export interface Ended {
  stage: 'ended';
  step: 'missing' | 'duplicate' | 'failure';
}

/** An attempt made: its outcome, when it ended, what the retry policy says comes next, and its record. */
export interface Sent extends Underway {
  stage: 'sent';
  outcome: AttemptOutcome;
  endedAt: number;
  verdict: RetryVerdict;
  record: AttemptRecord;
}

/** No slot for its webhook: the attempt waits until `until`, nothing spent. */
export interface Deferred extends Underway {
  stage: 'deferred';
  until: number;
  reason: DeferReason;
}

export type Attempted = Sent | Deferred;

/** `recorded` false: another run recorded this attempt (or this delivery) first; its outcome stands. */
export type Recorded = Attempted & { recorded: boolean };
