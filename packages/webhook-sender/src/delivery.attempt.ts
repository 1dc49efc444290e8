import { sign, standardSignatureHeader } from '@svc/webhook-signature';
import type { SendOutcome, WebhookSender } from './webhook.sender';

export const USER_AGENT = 'SVC-Webhooks/1.0';

/** `X-SVC-Modo`: live events and webhooks, or sandbox (`test`) ones. */
export type DeliveryMode = 'live' | 'test';

/** The secret a rotation replaced: it signs beside the current one until its overlap ends. */
export interface PreviousSecret {
  /** Never log it. */
  secret: string;
  expiresAt: Date;
}

export interface AttemptInput {
  url: string;
  /** The webhook's signing key: never log it. */
  secret: string;
  /** The secret before the last rotation while its overlap lasts (ignored once `expiresAt` has passed), else null. */
  previousSecret: PreviousSecret | null;
  /** The delivery id: the payload's `webhookId` and `X-Request-Id`, the same on every attempt. */
  deliveryId: string;
  /**
   * `webhook-id`: the event's id, the same for every webhook, retry and resend of the event; for a
   * PING, the PING delivery's own id (kept by its resends).
   */
  eventId: string;
  /** The event name: the payload's `event` and `X-SVC-Event`. */
  event: string;
  data: object;
  /** `X-SVC-Secuencia`: the event's position in its shipment's history; null (no header) for a PING. */
  sequence: number | null;
  /** `X-SVC-Modo`. */
  mode: DeliveryMode;
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
 * The headers of one attempt, stamped `at` (its body's `timestamp`):
 * - the contract's: `X-SVC-Signature` (`sha256=<hex>` HMAC-SHA256 of the exact body keyed with the
 *   whole secret string), the event, the attempt's time, the delivery id, the user agent;
 * - during a rotation's overlap, `X-SVC-Signature-Anterior`: the same keyed with the previous secret;
 * - Standard Webhooks': `webhook-id`, `webhook-timestamp` (Unix seconds of `at`) and
 *   `webhook-signature` (current secret first, then the previous one during the overlap);
 * - `X-SVC-Modo`, and `X-SVC-Secuencia` for a shipment event.
 */
export function deliveryHeaders(body: string, input: Omit<AttemptInput, 'url' | 'data'>, at: Date): Record<string, string> {
  const timestamp = at.toISOString();
  const previous = input.previousSecret !== null && input.previousSecret.expiresAt.getTime() > at.getTime() ? input.previousSecret.secret : null;
  const seconds = Math.floor(at.getTime() / 1000);
  const secrets = previous === null ? [input.secret] : [input.secret, previous];
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'x-svc-signature': sign(body, input.secret),
    'x-svc-event': input.event,
    'x-svc-timestamp': timestamp,
    'x-request-id': input.deliveryId,
    'user-agent': USER_AGENT,
    'webhook-id': input.eventId,
    'webhook-timestamp': String(seconds),
    'webhook-signature': standardSignatureHeader(input.eventId, seconds, body, secrets),
    'x-svc-modo': input.mode,
  };
  if (previous !== null) headers['x-svc-signature-anterior'] = sign(body, previous);
  if (input.sequence !== null) headers['x-svc-secuencia'] = String(input.sequence);
  return headers;
}

/**
 * One attempt of a delivery: builds the body `{event, timestamp, webhookId, data}` stamped with the
 * time of this attempt, signs its exact bytes and sends it once. Never throws for a receiver's
 * failure; the outcome says what happened.
 */
export async function attemptDelivery(sender: WebhookSender, input: AttemptInput): Promise<AttemptOutcome> {
  const at = new Date();
  const timestamp = at.toISOString();
  const body = deliveryBody(input, timestamp);
  const outcome = await sender.send(input.url, body, deliveryHeaders(body, input, at));
  return { ...outcome, timestamp };
}

/** A notice to the operator (OPERATOR_NOTIFY_URL): not a webhook's delivery, so its body names the company instead. */
export interface OperatorNoticeInput {
  url: string;
  /** OPERATOR_NOTIFY_SECRET: never log it. */
  secret: string;
  /** The notice's event id: `webhook-id` and `X-Request-Id`, the same on every attempt. */
  noticeId: string;
  event: string;
  empresaId: string;
  data: object;
  mode: DeliveryMode;
}

/**
 * One attempt of a notice to the operator: the body `{event, timestamp, empresaId, data}`, signed
 * and sent as a delivery is (the same headers, guard and timeout), with no `X-SVC-Secuencia`.
 */
export async function attemptOperatorNotice(sender: WebhookSender, input: OperatorNoticeInput): Promise<AttemptOutcome> {
  const at = new Date();
  const timestamp = at.toISOString();
  const body = JSON.stringify({ event: input.event, timestamp, empresaId: input.empresaId, data: input.data });
  const headers = deliveryHeaders(
    body,
    { secret: input.secret, previousSecret: null, deliveryId: input.noticeId, eventId: input.noticeId, event: input.event, sequence: null, mode: input.mode },
    at,
  );
  const outcome = await sender.send(input.url, body, headers);
  return { ...outcome, timestamp };
}
