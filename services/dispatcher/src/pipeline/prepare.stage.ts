import type { DeliveryJob } from '@svc/contracts';
import { abandonDelivery } from '@svc/platform';
import { isUnopened, type ReadTarget } from '../webhooks/webhook.repository';
import type { DeliveryProgress } from '../deliveries/delivery.repository';
import type { DeliveryContext } from './delivery.context';
import type { Ended, OwnJob, Ready } from './delivery.states';
import { reportFinished } from './delivery.report';

/**
 * How long a first attempt reuses its webhook's url, secrets and state without reading them again:
 * a burst to one webhook reads it once, and a change reaches first attempts within a second.
 */
export const WEBHOOK_CACHE_MS = 1000;

/** Cached targets kept at most; past it the cache starts afresh, so its memory stays bounded. */
const WEBHOOK_CACHE_ENTRIES = 10_000;

/** Where an attempt on an existing row comes from. */
export interface PrepareInput {
  delivery: DeliveryJob;
  /** The delivery's own job; null when an event's job makes the attempt. */
  ownJob: OwnJob | null;
  /**
   * Known pending with no attempt made, so its progress is not read: the first run of a first job
   * that an earlier version's fan-out queued marked `fresh` (no other job can have sent it).
   */
  untouched: boolean;
}

/**
 * Stage one, for a delivery that has a row: reads where it stands and its webhook's target, and
 * decides whether this attempt is owed. An attempt already made (a stalled job run twice, a
 * re-queue racing the original) is never sent again knowingly; a delivery whose webhook was
 * deactivated ends here, failed, without an attempt. An event's first attempts (no row yet) skip
 * this stage: the fan-out has just read their targets.
 */
export async function prepare(ctx: DeliveryContext, input: PrepareInput): Promise<Ready | Ended> {
  const { delivery, ownJob, untouched } = input;
  const [progress, target] = await Promise.all([
    untouched ? ({ estado: 'pendiente', intentos: 0 } satisfies DeliveryProgress) : ctx.progress.submit({ id: delivery.deliveryId, partitionAt: delivery.partitionAt }),
    // A first attempt takes the webhook from the cache; a retry reads it afresh.
    delivery.attempt === 1 ? cachedTarget(ctx, delivery.webhookId) : ctx.targets.submit(delivery.webhookId),
  ]);
  if (!progress || !target) {
    ctx.logger.warn({ deliveryId: delivery.deliveryId, eventId: delivery.eventId, webhook: delivery.webhookId }, 'delivery or webhook not found; dropped');
    return { stage: 'ended', step: 'missing' };
  }
  if (progress.estado !== 'pendiente' || progress.intentos !== delivery.attempt - 1) return { stage: 'ended', step: 'duplicate' };
  if (!target.active) {
    if (await abandonDelivery(ctx.db, delivery.deliveryId, delivery.partitionAt)) reportFinished(ctx, delivery, 'failure', { intentos: progress.intentos, reason: 'webhook inactive' });
    return { stage: 'ended', step: 'failure' };
  }
  // Never signed with a wrong key: the job fails (logged with the reason), BullMQ and then the
  // reconciler try again, and the delivery goes once the secret opens.
  if (isUnopened(target)) throw target.unopened;
  return { stage: 'ready', delivery, target, row: 'existing', ownJob };
}

async function cachedTarget(ctx: DeliveryContext, webhookId: string): Promise<ReadTarget | undefined> {
  const hit = ctx.targetCache.get(webhookId);
  if (hit && Date.now() - hit.at < WEBHOOK_CACHE_MS) return hit.target;
  const target = await ctx.targets.submit(webhookId);
  if (ctx.targetCache.size > WEBHOOK_CACHE_ENTRIES) ctx.targetCache.clear();
  ctx.targetCache.set(webhookId, { at: Date.now(), target });
  return target;
}
