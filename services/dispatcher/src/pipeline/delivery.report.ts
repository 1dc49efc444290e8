import type { DeliveryJob } from '@svc/contracts';
import type { DeliveryContext } from './delivery.context';

/**
 * A delivery ended: counted once, and its log line (a success's at debug: it is counted and in the
 * delivery log). Every stage that ends a delivery reports it here, so no stage imports another.
 */
export function reportFinished(ctx: DeliveryContext, delivery: DeliveryJob, outcome: 'success' | 'failure', fields: Record<string, unknown>): void {
  ctx.metrics.delivered(delivery.evento, outcome);
  const line = {
    deliveryId: delivery.deliveryId,
    eventId: delivery.eventId,
    requestId: delivery.requestId,
    webhook: delivery.webhookId,
    evento: delivery.evento,
    outcome,
    ...fields,
  };
  if (outcome === 'success') ctx.logger.debug(line, 'delivery finished');
  else ctx.logger.warn(line, 'delivery failed');
}
