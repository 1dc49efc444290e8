import type { DeliveryContext } from './delivery.context';
import type { NewDelivery } from '@svc/platform';
import type { Attempted, Recorded } from './delivery.states';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Stage three, for a delivery that has a row: a made attempt is recorded (batched with the others
 * in flight), waiting out a Postgres outage; a deferred one has its due time moved, so the
 * reconciler and the overdue gauge count it late only once its turn has passed (a failure throws:
 * nothing was spent, and its job runs again).
 */
export async function recordAttempt(ctx: DeliveryContext, attempted: Attempted): Promise<Recorded> {
  if (attempted.stage === 'deferred') {
    const { delivery, until } = attempted;
    await ctx.postponements.submit({ id: delivery.deliveryId, attempt: delivery.attempt, at: new Date(until), partitionAt: delivery.partitionAt });
    return { ...attempted, recorded: true };
  }
  const { record } = attempted;
  const recorded = await untilWritten(ctx, () => ctx.attempts.submit(record), { deliveryId: record.deliveryId, attempt: record.attempt });
  return { ...attempted, recorded };
}

/**
 * Stage three for an event's first attempts: one insert writes each new delivery as its attempt
 * left it (made, or deferred with its due time), batched with other events', in the statement that
 * marks the event fanned out when `complete` (every delivery it owes is among them). Until that
 * commits nothing says the event was fanned out, so a crash before it leaves the event's job to
 * run again, under the same delivery ids. A row already there (another run's) is not recorded.
 */
export async function recordEvent(
  ctx: DeliveryContext,
  event: { eventId: string; numeroGuia: string | null; complete: boolean; partitionAt?: string | undefined },
  attempted: readonly Attempted[],
): Promise<Recorded[]> {
  const rows = attempted.map((a) => newDelivery(a, event.numeroGuia));
  const inserted = await untilWritten(ctx, () => ctx.events.submit({ rows, eventId: event.complete ? event.eventId : null, partitionAt: event.partitionAt }), {
    eventId: event.eventId,
    deliveries: attempted.length,
  });
  return attempted.map((a) => ({ ...a, recorded: inserted.has(a.delivery.deliveryId) }));
}

const newDelivery = (a: Attempted, numeroGuia: string | null): NewDelivery => ({
  id: a.delivery.deliveryId,
  webhookId: a.delivery.webhookId,
  eventId: a.delivery.eventId,
  event: a.delivery.evento,
  numeroGuia,
  attempt: a.stage === 'sent' ? a.record : null,
  nextAt: a.stage === 'sent' ? a.record.nextAt : new Date(a.until),
});

/**
 * Runs a write of made attempts until it succeeds, waiting out a Postgres outage: the sends
 * happened, their record must follow. Once stopping it gives up and throws; the reconciler then
 * sends the attempt again, under the same id.
 */
async function untilWritten<T>(ctx: DeliveryContext, write: () => Promise<T>, context: Record<string, unknown>): Promise<T> {
  for (let wait = ctx.recordRetryMs.first; ; wait = Math.min(wait * 2, ctx.recordRetryMs.max)) {
    try {
      return await write();
    } catch (err) {
      if (ctx.closing) throw err;
      ctx.logger.warn({ ...context, err: (err as Error).message }, 'attempt not recorded yet; retrying');
      await sleep(wait);
    }
  }
}
