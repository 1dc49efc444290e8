import type { Job } from 'bullmq';
import type { Logger } from '@svc/observability';
import { DELIVERY_MAX_ATTEMPTS, JOBS, validPayload, type Db, type DeliveryJob, type DeliveryState } from '@svc/schema';
import { attemptDelivery, type WebhookSender } from '@svc/webhook-sender';
import { createMicroBatcher } from '../support/micro-batch';
import type { DispatcherMetrics } from '../observability/dispatcher-metrics';
import { findWebhookTargets, type WebhookTarget } from '../webhooks/webhook.repository';
import { abandonDelivery, findDeliveryStates, recordAttempts, type AttemptRecord } from './delivery.repository';

/** How long a webhook's url, secret and state are reused for first attempts without reading them again. */
export const WEBHOOK_CACHE_MS = 1000;

/** What became of one run of a delivery job. */
export type DeliveryStep = 'success' | 'retry' | 'failure' | 'duplicate' | 'missing';

/** Thrown so BullMQ schedules the next attempt (or, after the last, keeps the job among the failed). */
export class AttemptFailedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AttemptFailedError';
  }
}

export interface DeliveryProcessor {
  process(job: Job<unknown>): Promise<DeliveryStep>;
  drain(): Promise<void>;
}

/**
 * One attempt of one delivery per job run: find the target, send through the guarded sender, and
 * record the attempt (batched with the other jobs in flight; the job completes only after its
 * batch has committed, so an acknowledged attempt is never lost). A failure throws, and the
 * queue's backoff spaces the next attempt: 1 s, then 2 s, after the end of the previous one.
 *
 * The first run of a job cannot repeat an ended delivery (the fan-out queues pending deliveries
 * only, under a job id that makes a re-add a no-op), so it takes the webhook from a cache of one
 * second and goes straight to sending. A retry, or a job run again after its process died
 * (`attemptsStarted` ahead of `attemptsMade`), reads the delivery and its webhook afresh and skips a
 * delivery that already ended: the crashed run may have sent and recorded it.
 */
export function createDeliveryProcessor(deps: {
  db: Db;
  sender: WebhookSender;
  metrics: DispatcherMetrics;
  logger: Logger;
}): DeliveryProcessor {
  const { db, sender, metrics, logger } = deps;

  const webhooks = createMicroBatcher<string, WebhookTarget | undefined>(
    async (ids) => {
      const found = await findWebhookTargets(db, [...new Set(ids)]);
      return ids.map((id) => found.get(id));
    },
    { maxBatch: 500, maxInFlight: 2 },
  );
  const states = createMicroBatcher<string, DeliveryState | undefined>(
    async (ids) => {
      const found = await findDeliveryStates(db, [...new Set(ids)]);
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

  const recorder = createMicroBatcher<AttemptRecord, boolean>(
    async (attempts) => {
      const changed = await recordAttempts(db, attempts);
      return attempts.map((a) => changed.has(a.id));
    },
    { maxBatch: 500, maxInFlight: 2 },
  );

  const finished = (job: DeliveryJob, outcome: 'success' | 'failure', fields: Record<string, unknown>): void => {
    metrics.deliveries.inc({ evento: job.evento, outcome });
    logger.info(
      {
        deliveryId: job.deliveryId,
        eventId: job.eventId,
        requestId: job.requestId,
        webhookId: job.webhookId,
        evento: job.evento,
        outcome,
        ...fields,
      },
      'delivery finished',
    );
  };

  async function process(job: Job<unknown>): Promise<DeliveryStep> {
    const d = validPayload(JOBS.delivery, job);
    const attempt = job.attemptsMade + 1;
    const maxAttempts = job.opts.attempts ?? DELIVERY_MAX_ATTEMPTS;

    const firstRun = job.attemptsMade === 0 && (job.attemptsStarted ?? 1) <= 1;
    let target: WebhookTarget | undefined;
    if (firstRun) {
      target = await cachedWebhook(d.webhookId);
    } else {
      const [estado, current] = await Promise.all([states.submit(d.deliveryId), webhooks.submit(d.webhookId)]);
      // Already ended: the run that crashed had sent and recorded it. Never send twice knowingly.
      if (estado !== undefined && estado !== 'pendiente') return 'duplicate';
      target = estado === undefined ? undefined : current;
    }
    if (!target) {
      logger.warn({ deliveryId: d.deliveryId, eventId: d.eventId, webhookId: d.webhookId }, 'delivery or webhook not found; dropped');
      return 'missing';
    }
    if (!target.activo) {
      if (await abandonDelivery(db, d.deliveryId)) finished(d, 'failure', { intentos: attempt - 1, reason: 'webhook inactive' });
      return 'failure';
    }

    const outcome = await attemptDelivery(sender, {
      url: target.url,
      secret: target.secret,
      deliveryId: d.deliveryId,
      event: d.evento,
      data: d.data,
    });
    const receivedAt = Date.now();
    metrics.attempt(outcome.result, outcome.durationMs);

    const last = outcome.ok || attempt >= maxAttempts;
    const estado: DeliveryState = outcome.ok ? 'exitosa' : last ? 'fallida' : 'pendiente';
    const changed = await recorder.submit({
      id: d.deliveryId,
      attempt,
      statusCode: outcome.statusCode,
      at: new Date(outcome.timestamp),
      estado,
    });
    // Not changed: another run ended this delivery meanwhile; its outcome stands.
    if (!changed) return 'duplicate';

    const fields = { intentos: attempt, statusCode: outcome.statusCode, result: outcome.result, durationMs: Math.round(outcome.durationMs) };
    if (outcome.ok) {
      metrics.eventToDelivery.observe(Math.max(0, receivedAt - Date.parse(d.committedAt)) / 1000);
      finished(d, 'success', fields);
      return 'success';
    }
    if (last) finished(d, 'failure', fields);
    else logger.debug({ deliveryId: d.deliveryId, webhookId: d.webhookId, requestId: d.requestId, ...fields }, 'attempt failed; will retry');
    throw new AttemptFailedError(`attempt ${attempt} of ${maxAttempts} failed: ${outcome.result} (status ${outcome.statusCode})`);
  }

  return {
    process,
    async drain() {
      await Promise.all([webhooks.drain(), states.drain()]);
      await recorder.drain();
    },
  };
}
