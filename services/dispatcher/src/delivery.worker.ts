import type { Job } from 'bullmq';
import type { Logger } from '@svc/observability';
import { DELIVERY_MAX_ATTEMPTS, type Db, type DeliveryJob, type DeliveryState } from '@svc/schema';
import {
  abandonDelivery,
  attemptDelivery,
  findDeliveryTargets,
  recordAttempts,
  type AttemptRecord,
  type DeliveryTarget,
  type WebhookSender,
} from '@svc/webhook-sender';
import { createMicroBatcher } from './micro-batch';
import type { DispatcherMetrics } from './observability/dispatcher-metrics';

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
  process(job: Job<DeliveryJob>): Promise<DeliveryStep>;
  drain(): Promise<void>;
}

/**
 * One attempt of one delivery per job run. Reads the delivery and its webhook (batched with the
 * other jobs in flight), sends through the guarded sender, and records the attempt (batched too;
 * the job completes only after its batch has committed, so an acknowledged attempt is never lost).
 * A failure throws, and the queue's backoff spaces the next attempt: 1 s, then 2 s, after the end
 * of the previous one.
 */
export function createDeliveryProcessor(deps: {
  db: Db;
  sender: WebhookSender;
  metrics: DispatcherMetrics;
  logger: Logger;
}): DeliveryProcessor {
  const { db, sender, metrics, logger } = deps;

  const targets = createMicroBatcher<string, DeliveryTarget | undefined>(
    async (ids) => {
      const found = await findDeliveryTargets(db, [...new Set(ids)]);
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

  async function process(job: Job<DeliveryJob>): Promise<DeliveryStep> {
    const d = job.data;
    const attempt = job.attemptsMade + 1;
    const maxAttempts = job.opts.attempts ?? DELIVERY_MAX_ATTEMPTS;

    const target = await targets.submit(d.deliveryId);
    if (!target) {
      logger.warn({ deliveryId: d.deliveryId, eventId: d.eventId, webhookId: d.webhookId }, 'delivery row not found; dropped');
      return 'missing';
    }
    // Already ended: a job re-run after a crash, or a re-added duplicate. Never send twice knowingly.
    if (target.estado !== 'pendiente') return 'duplicate';
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
      await targets.drain();
      await recorder.drain();
    },
  };
}
