import { DelayedError, type Job, type Queue } from 'bullmq';
import type { Logger } from '@svc/observability';
import {
  bulkJobs,
  DELIVERY_MAX_ATTEMPTS,
  JOBS,
  retryDelayMs,
  validPayload,
  type Db,
  type DeliveryJob,
  type DeliveryState,
} from '@svc/schema';
import { attemptDelivery, type AttemptOutcome, type WebhookSender } from '@svc/webhook-sender';
import { createMicroBatcher } from '../support/micro-batch';
import type { DispatcherMetrics } from '../observability/dispatcher-metrics';
import { findWebhookTargets, type WebhookTarget } from '../webhooks/webhook.repository';
import {
  abandonDelivery,
  findDeliveryProgress,
  postponeDeliveries,
  recordAttempts,
  type AttemptRecord,
  type DeliveryProgress,
  type Postponement,
} from './delivery.repository';
import type { Admission, WebhookSlots } from './webhook-slots.limiter';

/** How long a webhook's url, secret and state are reused for first attempts without reading them again. */
export const WEBHOOK_CACHE_MS = 1000;

/** What became of one run of a delivery: `deferred` when its webhook had no room (see below). */
export type DeliveryStep = 'success' | 'retry' | 'failure' | 'duplicate' | 'missing' | 'deferred';

export interface DeliveryProcessor {
  /**
   * Runs one job. A job whose webhook has no free slot (see webhook-slots.limiter.ts) is moved back
   * to the delayed set until its turn, which needs the worker's lock `token`, and throws BullMQ's
   * DelayedError: neither the job's attempts nor the delivery's are spent.
   */
  process(job: Job<unknown>, token?: string): Promise<DeliveryStep>;
  /**
   * The first attempt of a recorded delivery that has no job of its own: one a re-run of its event
   * finds unsent (recorded deferred, or before first attempts were sent before their record). Its
   * progress is read first, as a job's is. A webhook with no free slot gets the delivery queued as
   * a delayed job at its turn (`deferred`); a failed attempt queues the next one, as a job's does.
   */
  attempt(d: DeliveryJob): Promise<DeliveryStep>;
  /**
   * The first attempt of a delivery that has no row yet (the fan-out records it afterwards, with
   * this outcome): sent, or deferred when its webhook has no free slot.
   */
  sendFirst(d: DeliveryJob, target: WebhookTarget): Promise<FirstAttempt>;
  /**
   * After the fan-out's record of a first attempt: its metrics, its log line and its next
   * attempt's job, as after a job's attempt. `recorded` false: another run recorded that delivery
   * first; its outcome stands.
   */
  settleFirst(d: DeliveryJob, first: FirstAttempt, recorded: boolean): Promise<DeliveryStep>;
  /** Runs a write of made attempts until it succeeds, waiting out a Postgres outage (not once stopping). */
  untilWritten<T>(write: () => Promise<T>, context: Record<string, unknown>): Promise<T>;
  drain(): Promise<void>;
}

/** An attempt made: its record and when it ended. */
export interface SentAttempt {
  record: AttemptRecord;
  outcome: AttemptOutcome;
  endedAt: number;
}

/** What `sendFirst` did: sent, or deferred until its webhook's turn. */
export type FirstAttempt = { sent: SentAttempt } | { deferredUntil: number };

export interface DeliveryProcessorOptions {
  /** Waits between tries to record an attempt while Postgres is away. Default 250 ms doubling to 5 s. */
  recordRetryMs?: { first: number; max: number };
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * One attempt of one delivery per job. Postgres says where the delivery stands, so a job whose
 * attempt has already been made (a stalled job run twice, a re-queue racing the original) sends
 * nothing; then the guarded sender sends once, and the attempt is recorded (batched with the other
 * jobs in flight). A receiver's failure is recorded with the due time of the next attempt, whose
 * job is queued at once with its delay (1 s, then 2 s after this attempt ended): it never fails
 * the job. Only a send is an attempt: a failure to read Postgres throws, and BullMQ's retries (which
 * count no attempt) run the job again; a failure to record waits and tries again with the outcome
 * in hand, so a made attempt is recorded once Postgres is back. Whatever Redis loses, the
 * reconciler queues again from the record.
 */
export function createDeliveryProcessor(
  deps: {
    db: Db;
    sender: WebhookSender;
    deliveryQueue: Pick<Queue<DeliveryJob>, 'addBulk'>;
    slots: WebhookSlots;
    metrics: DispatcherMetrics;
    logger: Logger;
  },
  options: DeliveryProcessorOptions = {},
): DeliveryProcessor {
  const { db, sender, deliveryQueue, slots, metrics, logger } = deps;
  const recordRetry = options.recordRetryMs ?? { first: 250, max: 5000 };
  let closing = false;

  const webhooks = createMicroBatcher<string, WebhookTarget | undefined>(
    async (ids) => {
      const found = await findWebhookTargets(db, [...new Set(ids)]);
      return ids.map((id) => found.get(id));
    },
    { maxBatch: 500, maxInFlight: 2 },
  );
  const cache = new Map<string, { at: number; target: WebhookTarget | undefined }>();
  const cachedWebhook = async (id: string): Promise<WebhookTarget | undefined> => {
    const hit = cache.get(id);
    if (hit && Date.now() - hit.at < WEBHOOK_CACHE_MS) return hit.target;
    const target = await webhooks.submit(id);
    if (cache.size > 10_000) cache.clear();
    cache.set(id, { at: Date.now(), target });
    return target;
  };
  const progress = createMicroBatcher<string, DeliveryProgress | undefined>(
    async (ids) => {
      const found = await findDeliveryProgress(db, [...new Set(ids)]);
      return ids.map((id) => found.get(id));
    },
    { maxBatch: 500, maxInFlight: 2 },
  );
  const recorder = createMicroBatcher<AttemptRecord, boolean>(
    async (attempts) => {
      const changed = await recordAttempts(db, attempts);
      return attempts.map((a) => changed.has(a.id));
    },
    { maxBatch: 500, maxInFlight: 2 },
  );

  const postponer = createMicroBatcher<Postponement, void>(
    async (postponed) => {
      await postponeDeliveries(db, postponed);
      return postponed.map(() => undefined);
    },
    { maxBatch: 500, maxInFlight: 2 },
  );

  type Wait = Exclude<Admission, { slot: unknown }>;
  /** What to do with a delivery whose webhook has no room: its due time is recorded first. */
  type Defer = (d: DeliveryJob, wait: Wait) => Promise<DeliveryStep>;

  const postpone = async (d: DeliveryJob, wait: Wait): Promise<void> => {
    metrics.deferrals.inc({ reason: wait.reason });
    await postponer.submit({ id: d.deliveryId, attempt: d.attempt, at: new Date(wait.deferUntil) });
  };

  /**
   * A job goes back to the delayed set until its turn: first the record (its due time), then
   * Redis. Either failing throws, and BullMQ runs the job again later.
   */
  const delayJob = (job: Job<unknown>, token: string | undefined): Defer => async (d, wait) => {
    await postpone(d, wait);
    await job.moveToDelayed(wait.deferUntil, token);
    throw new DelayedError();
  };

  /**
   * A delivery without a job of its own gets one, delayed until its turn, once its due time is
   * recorded: if Redis refuses it, the reconciler queues it when it is overdue.
   */
  const queueLater: Defer = async (d, wait) => {
    await postpone(d, wait);
    await queueAttempt(d, wait.deferUntil);
    return 'deferred';
  };

  /** Queues a job for attempt `d.attempt` at `at`; the record already says when it is due. */
  async function queueAttempt(d: DeliveryJob, at: number): Promise<void> {
    const { fresh: _fresh, ...job } = d;
    try {
      await deliveryQueue.addBulk(bulkJobs(JOBS.delivery, [job], { delay: Math.max(0, at - Date.now()) }));
    } catch (err) {
      // Recorded with its due time: the reconciler queues it once it is overdue.
      logger.warn({ deliveryId: d.deliveryId, attempt: d.attempt, err: (err as Error).message }, 'attempt not queued; the reconciler will');
    }
  }

  /** Runs a write of made attempts, waiting out a Postgres outage: the sends happened, their record must follow. */
  async function untilWritten<T>(write: () => Promise<T>, context: Record<string, unknown>): Promise<T> {
    for (let wait = recordRetry.first; ; wait = Math.min(wait * 2, recordRetry.max)) {
      try {
        return await write();
      } catch (err) {
        // Stopping: leave it to the reconciler, which sends it again (same webhookId).
        if (closing) throw err;
        logger.warn({ ...context, err: (err as Error).message }, 'attempt not recorded yet; retrying');
        await sleep(wait);
      }
    }
  }

  const record = (attempt: AttemptRecord, d: DeliveryJob): Promise<boolean> =>
    untilWritten(() => recorder.submit(attempt), { deliveryId: d.deliveryId, attempt: attempt.attempt });

  const finished = (d: DeliveryJob, outcome: 'success' | 'failure', fields: Record<string, unknown>): void => {
    metrics.delivered(d.evento, outcome);
    const line = { deliveryId: d.deliveryId, eventId: d.eventId, requestId: d.requestId, webhookId: d.webhookId, evento: d.evento, outcome, ...fields };
    // A success is counted (svc_deliveries_total) and in the delivery log; its line is for
    // debugging only. Writing it at info cost 4.4% of the dispatcher's CPU at saturation (issue 16's profile).
    if (outcome === 'success') logger.debug(line, 'delivery finished');
    else logger.warn(line, 'delivery failed');
  };

  function process(job: Job<unknown>, token?: string): Promise<DeliveryStep> {
    const d = validPayload(JOBS.delivery, job);
    // The first run of the first job of a delivery the fan-out created and queued (jobs queued
    // before the fan-out made first attempts itself, or deferred by it): no other job has sent it.
    const untouched = d.fresh === true && d.attempt === 1 && job.attemptsMade === 0 && (job.attemptsStarted ?? 1) <= 1;
    return deliver(d, untouched, delayJob(job, token));
  }

  /**
   * Sends one attempt of `d` unless the record says it was made; `untouched`: known pending with
   * no attempt made, without reading it (this spares a Postgres read on nearly every delivery:
   * bench/README.md, issue 10 figures).
   */
  async function deliver(d: DeliveryJob, untouched: boolean, defer: Defer): Promise<DeliveryStep> {
    const [now, target] = await Promise.all([
      untouched ? { estado: 'pendiente' as const, intentos: 0 } : progress.submit(d.deliveryId),
      // A first attempt takes the webhook from a cache of one second; a retry reads it afresh.
      d.attempt === 1 ? cachedWebhook(d.webhookId) : webhooks.submit(d.webhookId),
    ]);
    if (!now || !target) {
      logger.warn({ deliveryId: d.deliveryId, eventId: d.eventId, webhookId: d.webhookId }, 'delivery or webhook not found; dropped');
      return 'missing';
    }
    // Already made (or ended): another run sent it. Never send twice knowingly.
    if (now.estado !== 'pendiente' || now.intentos !== d.attempt - 1) return 'duplicate';
    if (!target.activo) {
      if (await abandonDelivery(db, d.deliveryId)) finished(d, 'failure', { intentos: now.intentos, reason: 'webhook inactive' });
      return 'failure';
    }

    const sent = await send(d, target);
    if (!('record' in sent)) return defer(d, sent);
    const changed = await record(sent.record, d);
    // Not changed: another run recorded this attempt meanwhile; its outcome stands.
    if (!changed) return 'duplicate';
    return settle(d, sent);
  }

  /** Sends attempt `d.attempt` if its webhook has a free slot: the outcome, ready to record. */
  async function send(d: DeliveryJob, target: WebhookTarget): Promise<SentAttempt | Wait> {
    // A retry is due at the contract's time (1 s, then 2 s after the previous attempt ended): the
    // limiter lets no other tenant make it late.
    const admission = await slots.acquire(d.webhookId, { retry: d.attempt > 1 });
    if (!('slot' in admission)) return admission;
    const { slot } = admission;
    const outcome: AttemptOutcome = await attemptDelivery(sender, {
      url: target.url,
      secret: target.secret,
      previousSecret: target.previousSecret,
      deliveryId: d.deliveryId,
      eventId: d.eventId,
      event: d.evento,
      data: d.data,
      sequence: d.sequence ?? null,
      mode: d.mode ?? 'live',
    }).then(
      (o) => {
        slot.release(o);
        return o;
      },
      (err: unknown) => {
        slot.release({ ok: false, durationMs: 0 });
        throw err;
      },
    );
    const endedAt = Date.now();
    metrics.attempt(outcome.result, outcome.durationMs);

    const last = outcome.ok || d.attempt >= DELIVERY_MAX_ATTEMPTS;
    const estado: DeliveryState = outcome.ok ? 'exitosa' : last ? 'fallida' : 'pendiente';
    const nextAt = last ? null : new Date(endedAt + retryDelayMs(d.attempt));
    return {
      outcome,
      endedAt,
      record: {
        id: d.deliveryId,
        attempt: d.attempt,
        statusCode: outcome.statusCode,
        at: new Date(outcome.timestamp),
        estado,
        nextAt,
        durationMs: outcome.durationMs,
        error: outcome.error,
        message: outcome.message,
        response: outcome.response,
      },
    };
  }

  /** After a made attempt's record: its metrics and log line, and the next attempt's job. */
  async function settle(d: DeliveryJob, { outcome, endedAt, record: { nextAt } }: SentAttempt): Promise<DeliveryStep> {
    const fields = {
      intentos: d.attempt,
      statusCode: outcome.statusCode,
      result: outcome.result,
      durationMs: Math.round(outcome.durationMs),
      ...(outcome.ok ? {} : { error: outcome.error, reason: outcome.message }),
    };
    if (outcome.ok) {
      metrics.eventToDelivery.observe(Math.max(0, endedAt - Date.parse(d.committedAt)) / 1000);
      finished(d, 'success', fields);
      return 'success';
    }
    if (nextAt === null) {
      finished(d, 'failure', fields);
      return 'failure';
    }
    logger.debug({ deliveryId: d.deliveryId, webhookId: d.webhookId, requestId: d.requestId, ...fields }, 'attempt failed; will retry');
    await queueAttempt({ ...d, attempt: d.attempt + 1 }, nextAt.getTime());
    return 'retry';
  }

  return {
    process,
    attempt: (d) => deliver(d, false, queueLater),
    async sendFirst(d, target) {
      const sent = await send(d, target);
      if ('record' in sent) return { sent };
      metrics.deferrals.inc({ reason: sent.reason });
      return { deferredUntil: sent.deferUntil };
    },
    async settleFirst(d, first, recorded) {
      if (!recorded) return 'duplicate';
      if ('sent' in first) return settle(d, first.sent);
      // Recorded with its due time: a delayed job until its webhook's turn.
      await queueAttempt(d, first.deferredUntil);
      return 'deferred';
    },
    untilWritten,
    async drain() {
      closing = true;
      await Promise.all([webhooks.drain(), progress.drain(), postponer.drain()]);
      await recorder.drain();
    },
  };
}
