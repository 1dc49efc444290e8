import { setTimeout as sleep } from 'node:timers/promises';
import { attemptDelivery, type AttemptOutcome } from '@svc/webhook-sender';
import { isRetry, verdictOf, waitBeforeSend } from '../retry-policy/delivery-retry.policy';
import type { DeliveryContext } from './delivery.context';
import type { Deferred, Ready, Sent } from './delivery.states';

/**
 * Stage two: the attempt, if its webhook has a free slot (fair-share/webhook-slots.limiter.ts);
 * otherwise it is deferred until the webhook's likely turn, no attempt spent. A receiver's failure
 * is an outcome like any other, with the retry policy's verdict (the due time of the next attempt
 * when one remains); only a fault of the sender itself throws.
 */
export async function send(ctx: DeliveryContext, ready: Ready): Promise<Sent | Deferred> {
  const { delivery, target } = ready;
  // A retry's job comes early (the retry policy's lead): the attempt waits for its due time.
  const early = waitBeforeSend(delivery.dueAt);
  if (early > 0) await sleep(early);
  // Slots are shared between companies first, then between a company's webhooks. A retry is due at
  // the contract's time: the limiter lets no other tenant make it late.
  const admission = await ctx.slots.acquire(delivery.webhookId, { companyId: target.companyId, retry: isRetry(delivery.attempt) });
  if (!('slot' in admission)) {
    ctx.metrics.deferrals.inc({ reason: admission.reason });
    return { ...ready, stage: 'deferred', until: admission.deferUntil, reason: admission.reason };
  }
  const { slot } = admission;
  const input = {
    secret: target.secret,
    previousSecret: target.previousSecret,
    deliveryId: delivery.deliveryId,
    eventId: delivery.eventId,
    event: delivery.evento,
    data: delivery.data,
    sequence: delivery.sequence ?? null,
    mode: delivery.mode ?? 'live',
  };
  // A listening session's attempt goes through its stream to `svc listen` (listen/listen.relay.ts).
  const attempt = target.kind === 'escucha' ? ctx.listen.attempt(target.id, input) : attemptDelivery(ctx.sender, { ...input, url: target.url });
  const outcome: AttemptOutcome = await attempt.then(
    (o) => {
      slot.release(o);
      return o;
    },
    (err: unknown) => {
      slot.release({ ok: false, durationMs: 0 });
      throw err;
    },
  );
  // When the answer ended, as the sender saw it (its start plus its duration), not when this line
  // runs: under saturation the hops between (the connection's hand-back, the slot's release) took
  // tens of ms, and the next attempt, due 1 s or 2 s after this time, came as late.
  const endedAt = Date.parse(outcome.timestamp) + outcome.durationMs;
  ctx.metrics.attempt(outcome.result, outcome.durationMs);

  const verdict = verdictOf(delivery.attempt, outcome.ok, endedAt);
  return {
    ...ready,
    stage: 'sent',
    outcome,
    endedAt,
    verdict,
    record: {
      deliveryId: delivery.deliveryId,
      attempt: delivery.attempt,
      at: new Date(outcome.timestamp),
      statusCode: outcome.statusCode,
      durationMs: outcome.durationMs,
      error: outcome.error,
      message: outcome.message,
      response: outcome.response,
      state: verdict.estado,
      nextAt: verdict.kind === 'retry' ? new Date(verdict.dueAt) : null,
      partitionAt: delivery.partitionAt,
    },
  };
}
