import { Webhook, type WebhookOptions } from 'standardwebhooks';
import type { ReceivedRequest } from './https-receiver';

/**
 * Verification of a received delivery by the `standardwebhooks` npm package itself (not a copy of its
 * algorithm): what an integrator's receiver does with `new Webhook(secret).verify(rawBody, headers)`.
 */

/** The request's headers as one string each, as the package takes them. */
export function headersOf(request: Pick<ReceivedRequest, 'headers'>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(request.headers)) {
    if (value !== undefined) out[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}

/** The payload the package returns, or its WebhookVerificationError (an Error) thrown. */
export function verifyStandard(request: Pick<ReceivedRequest, 'headers' | 'rawBody'>, secret: string | Uint8Array, options?: WebhookOptions): unknown {
  return new Webhook(secret, options).verify(request.rawBody, headersOf(request));
}

/** Whether the package accepts the delivery with this secret. */
export function acceptedByStandard(request: Pick<ReceivedRequest, 'headers' | 'rawBody'>, secret: string | Uint8Array, options?: WebhookOptions): boolean {
  try {
    verifyStandard(request, secret, options);
    return true;
  } catch {
    return false;
  }
}
