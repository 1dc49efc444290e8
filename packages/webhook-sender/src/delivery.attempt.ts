import { sign } from '@svc/webhook-signature';
import type { SendOutcome, WebhookSender } from './webhook.sender';

export const USER_AGENT = 'SVC-Webhooks/1.0';

export interface AttemptInput {
  url: string;
  /** The webhook's signing key: never log it. */
  secret: string;
  /** The delivery id: the payload's `webhookId` and `X-Request-Id`, the same on every attempt. */
  deliveryId: string;
  /** The event name: the payload's `event` and `X-SVC-Event`. */
  event: string;
  data: object;
}

export interface AttemptOutcome extends SendOutcome {
  /** The payload's `timestamp` and `X-SVC-Timestamp` of this attempt (ISO 8601). */
  timestamp: string;
}

/** The exact body of one attempt: serialised once, so the bytes signed are the bytes sent. */
export function deliveryBody(input: Pick<AttemptInput, 'deliveryId' | 'event' | 'data'>, timestamp: string): string {
  return JSON.stringify({ event: input.event, timestamp, webhookId: input.deliveryId, data: input.data });
}

/**
 * The headers of one attempt: the HMAC-SHA256 of the exact body keyed with the secret
 * (`sha256=<hex>`), the event, the attempt's time, the delivery id and the platform's user agent.
 */
export function deliveryHeaders(body: string, secret: string, event: string, timestamp: string, deliveryId: string): Record<string, string> {
  return {
    'content-type': 'application/json',
    'x-svc-signature': sign(body, secret),
    'x-svc-event': event,
    'x-svc-timestamp': timestamp,
    'x-request-id': deliveryId,
    'user-agent': USER_AGENT,
  };
}

/**
 * One attempt of a delivery: builds the body `{event, timestamp, webhookId, data}` stamped with the
 * time of this attempt, signs its exact bytes and sends it once. Never throws for a receiver's
 * failure; the outcome says what happened.
 */
export async function attemptDelivery(sender: WebhookSender, input: AttemptInput): Promise<AttemptOutcome> {
  const timestamp = new Date().toISOString();
  const body = deliveryBody(input, timestamp);
  const outcome = await sender.send(input.url, body, deliveryHeaders(body, input.secret, input.event, timestamp, input.deliveryId));
  return { ...outcome, timestamp };
}
