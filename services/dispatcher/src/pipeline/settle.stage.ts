import { bulkJobs, JOBS, type DeliveryJob } from '@svc/contracts';
import { queueDelayFor } from '../retry-policy/delivery-retry.policy';
import type { DeliveryContext } from './delivery.context';
import { reportFinished } from './delivery.report';
import type { DeliveryStep, Recorded } from './delivery.states';

/**
 * Stage four, once the record stands: a made attempt's metrics and log line, and, when the retry
 * policy's verdict is a retry, its next attempt's job; a deferred attempt only ends its job (the
 * deferral scheduler queues it when due). An attempt another run recorded first settles as that
 * run's: nothing more is done here.
 */
export async function settle(ctx: DeliveryContext, recorded: Recorded): Promise<DeliveryStep> {
  if (!recorded.recorded) return 'duplicate';
  const { delivery } = recorded;

  // A deferred attempt waits in Postgres, not Redis: its due time is recorded and its job (if any)
  // ends here; the deferral scheduler queues it again when it falls due.
  if (recorded.stage === 'deferred') return 'deferred';

  const { outcome, endedAt, verdict } = recorded;
  const fields = {
    intentos: delivery.attempt,
    statusCode: outcome.statusCode,
    result: outcome.result,
    durationMs: Math.round(outcome.durationMs),
    ...(outcome.ok ? {} : { error: outcome.error, reason: outcome.message }),
  };
  if (outcome.ok) {
    ctx.metrics.eventToDelivery.observe(Math.max(0, endedAt - Date.parse(delivery.committedAt)) / 1000);
    reportFinished(ctx, delivery, 'success', fields);
    ctx.health?.ended(delivery, { ok: true, at: endedAt, statusCode: outcome.statusCode });
    return 'success';
  }
  if (verdict.kind === 'final') {
    reportFinished(ctx, delivery, 'failure', fields);
    // Its webhook's health (a batched count, never awaited here): deactivation and notices follow from it.
    ctx.health?.ended(delivery, { ok: false, at: endedAt, statusCode: outcome.statusCode });
    return 'failure';
  }
  ctx.logger.debug({ deliveryId: delivery.deliveryId, webhook: delivery.webhookId, requestId: delivery.requestId, ...fields }, 'attempt failed; will retry');
  await queueAttempt(ctx, { ...delivery, attempt: verdict.attempt }, verdict.dueAt);
  return 'retry';
}

/**
 * Queues the job of attempt `delivery.attempt`, due at `dueAt`; its record already says when it is
 * due, so if Redis refuses it the reconciler queues it once it is overdue.
 */
async function queueAttempt(ctx: DeliveryContext, delivery: DeliveryJob, dueAt: number): Promise<void> {
  const { fresh: _fresh, ...job } = delivery;
  try {
    await ctx.deliveryQueue.addBulk(bulkJobs(JOBS.delivery, [{ ...job, dueAt }], { delay: queueDelayFor(dueAt) }));
  } catch (err) {
    ctx.logger.warn({ deliveryId: delivery.deliveryId, attempt: delivery.attempt, err: (err as Error).message }, 'attempt not queued; the reconciler will');
  }
}
