import type { Job, Queue } from 'bullmq';
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
import { abandonDelivery, findDeliveryProgress, recordAttempts, type AttemptRecord, type DeliveryProgress } from './delivery.repository';

/** How long a webhook's url, secret and state are reused for first attempts without reading them again. */
export const WEBHOOK_CACHE_MS = 1000;

/** What became of one run of a delivery job. */
export type DeliveryStep = 'success' | 'retry' | 'failure' | 'duplicate' | 'missing';

export interface DeliveryProcessor {
  process(job: Job<unknown>): Promise<DeliveryStep>;
  drain(): Promise<void>;
}

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
    metrics: DispatcherMetrics;
    logger: Logger;
  },
  options: DeliveryProcessorOptions = {},
): DeliveryProcessor {
  const { db, sender, deliveryQueue, metrics, logger } = deps;
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

  /** Records a made attempt, waiting out a Postgres outage: the send happened, its record must follow. */
  async function record(attempt: AttemptRecord, d: DeliveryJob): Promise<boolean> {
    for (let wait = recordRetry.first; ; wait = Math.min(wait * 2, recordRetry.max)) {
      try {
        return await recorder.submit(attempt);
      } catch (err) {
        // Stopping: leave it to the reconciler, which sends it again (same webhookId).
        if (closing) throw err;
        logger.warn({ deliveryId: d.deliveryId, attempt: attempt.attempt, err: (err as Error).message }, 'attempt not recorded yet; retrying');
        await sleep(wait);
      }
    }
  }

  const finished = (d: DeliveryJob, outcome: 'success' | 'failure', fields: Record<string, unknown>): void => {
    metrics.deliveries.inc({ evento: d.evento, outcome });
    const line = { deliveryId: d.deliveryId, eventId: d.eventId, requestId: d.requestId, webhookId: d.webhookId, evento: d.evento, outcome, ...fields };
    if (outcome === 'success') logger.info(line, 'delivery finished');
    else logger.warn(line, 'delivery failed');
  };

  async function process(job: Job<unknown>): Promise<DeliveryStep> {
    const d = validPayload(JOBS.delivery, job);
    // The first run of a delivery's first job, made by the fan-out that created the delivery: no
    // other job has sent it, so its progress is known (pending, nothing made) without a read. This
    // spares a Postgres read on nearly every delivery (bench/README.md, issue 10 figures).
    const untouched = d.fresh === true && d.attempt === 1 && job.attemptsMade === 0 && (job.attemptsStarted ?? 1) <= 1;
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

    const outcome: AttemptOutcome = await attemptDelivery(sender, {
      url: target.url,
      secret: target.secret,
      deliveryId: d.deliveryId,
      event: d.evento,
      data: d.data,
    });
    const endedAt = Date.now();
    metrics.attempt(outcome.result, outcome.durationMs);

    const last = outcome.ok || d.attempt >= DELIVERY_MAX_ATTEMPTS;
    const estado: DeliveryState = outcome.ok ? 'exitosa' : last ? 'fallida' : 'pendiente';
    const nextAt = last ? null : new Date(endedAt + retryDelayMs(d.attempt));
    const changed = await record(
      {
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
      d,
    );
    // Not changed: another run recorded this attempt meanwhile; its outcome stands.
    if (!changed) return 'duplicate';

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
    if (last) {
      finished(d, 'failure', fields);
      return 'failure';
    }
    logger.debug({ deliveryId: d.deliveryId, webhookId: d.webhookId, requestId: d.requestId, ...fields }, 'attempt failed; will retry');
    const { fresh: _fresh, ...rest } = d;
    const next: DeliveryJob = { ...rest, attempt: d.attempt + 1 };
    try {
      await deliveryQueue.addBulk(bulkJobs(JOBS.delivery, [next], { delay: nextAt!.getTime() - Date.now() }));
    } catch (err) {
      // Recorded with its due time: the reconciler queues it once it is overdue.
      logger.warn({ deliveryId: d.deliveryId, attempt: next.attempt, err: (err as Error).message }, 'next attempt not queued; the reconciler will');
    }
    return 'retry';
  }

  return {
    process,
    async drain() {
      closing = true;
      await Promise.all([webhooks.drain(), progress.drain()]);
      await recorder.drain();
    },
  };
}
