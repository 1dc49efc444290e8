import type { RedisClient, RedisKeys } from '@svc/platform';
import { RateLimiter } from '../rate-limit/rate-limiter';

/**
 * Resends of one event to one webhook in any sliding hour, whoever asks (API or portal) and
 * whichever of its deliveries is resent (a resend of a resend is the same event): a person retrying
 * by hand needs a few, while a script looping on `reenviar` would otherwise make a receiver take the
 * same event without end and fill the deliveries queue.
 */
export const RESENDS_PER_HOUR = 10;
const HOUR_MS = 3_600_000;

/** The sliding window of each (webhook, event), in Redis so that every gateway counts the same resends. */
export function createResendLimiter(redis: RedisClient, keys: RedisKeys): RateLimiter {
  return new RateLimiter(redis, keys, RESENDS_PER_HOUR, HOUR_MS, 'resend');
}

/** The window of one event (for a PING, the PING's own id, which its resends keep) sent to one webhook. */
export const resendWindowId = (webhookId: string, eventId: string): string => `${webhookId}:${eventId}`;
