import { bulkJobs, JOBS, type DeliveryJob } from '@svc/contracts';
import type { DeliveryContext } from './delivery.context';
import type { DeliveryStep, Recorded } from './delivery.states';

/**
 * A retry's job comes out of the delayed set this long before the attempt is due, and the attempt
 * waits for its time in the process (send.stage.ts): under saturation the queue's promotion and
 * the pipeline's reads made retries up to 360 ms late at p99 (bench/README.md, issue 30); this
 * absorbs that, and costs a worker's job (not a send slot) for that long.
 */
export const RETRY_LEAD_MS = 300;

/**
 * Stage four, once the record stands: a made attempt's metrics and log line, and its next
 * attempt's job; a deferred attempt only ends its job (the deferral scheduler queues it when due). An attempt another run recorded
 * first settles as that run's: nothing more is done here.
 */
export async function settle(ctx: DeliveryContext, recorded: Recorded): Promise<DeliveryStep> {
  if (!recorded.recorded) return 'duplicate';
  const { delivery } = recorded;

  // A deferred attempt waits in Postgres, not Redis: its due time is recorded and its job (if any)
  // ends here; the deferral scheduler queues it again when it falls due.
  if (recorded.stage === 'deferred') return 'deferred';

  const { outcome, endedAt, record } = recorded;
  const fields = {
    intentos: delivery.attempt,
    statusCode: outcome.statusCode,
    result: outcome.result,
    durationMs: Math.round(outcome.durationMs),
    ...(outcome.ok ? {} : { error: outcome.error, reason: outcome.message }),
  };
  if (outcome.ok) {
    ctx.metrics.eventToDelivery.observe(Math.max(0, endedAt - Date.parse(delivery.committedAt)) / 1000);
    finished(ctx, delivery, 'success', fields);
    return 'success';
  }
  if (record.nextAt === null) {
    finished(ctx, delivery, 'failure', fields);
    return 'failure';
  }
  ctx.logger.debug({ deliveryId: delivery.deliveryId, webhookId: delivery.webhookId, requestId: delivery.requestId, ...fields }, 'attempt failed; will retry');
  await queueAttempt(ctx, { ...delivery, attempt: delivery.attempt + 1 }, record.nextAt.getTime());
  return 'retry';
}

/** A delivery ended: counted once, and its log line (a success's at debug: it is counted and in the delivery log). */
export function finished(ctx: DeliveryContext, delivery: DeliveryJob, outcome: 'success' | 'failure', fields: Record<string, unknown>): void {
  ctx.metrics.delivered(delivery.evento, outcome);
  const line = {
    deliveryId: delivery.deliveryId,
    eventId: delivery.eventId,
    requestId: delivery.requestId,
    webhookId: delivery.webhookId,
    evento: delivery.evento,
    outcome,
    ...fields,
  };
  if (outcome === 'success') ctx.logger.debug(line, 'delivery finished');
  else ctx.logger.warn(line, 'delivery failed');
}

/**
 * Queues the job of attempt `delivery.attempt` for `at`; its record already says when it is due,
 * so if Redis refuses it the reconciler queues it once it is overdue.
 */
async function queueAttempt(ctx: DeliveryContext, delivery: DeliveryJob, at: number): Promise<void> {
  const { fresh: _fresh, ...job } = delivery;
  try {
    await ctx.deliveryQueue.addBulk(bulkJobs(JOBS.delivery, [{ ...job, dueAt: at }], { delay: Math.max(0, at - RETRY_LEAD_MS - Date.now()) }));
  } catch (err) {
    ctx.logger.warn({ deliveryId: delivery.deliveryId, attempt: delivery.attempt, err: (err as Error).message }, 'attempt not queued; the reconciler will');
  }
}
