import { createHmac, timingSafeEqual } from 'node:crypto';

/** Header that carries `sha256=<hex>` of the raw body, keyed with the webhook's secret. */
export const SIGNATURE_HEADER = 'X-SVC-Signature';
const PREFIX = 'sha256=';

/** `sha256=<hex HMAC-SHA256 of the exact raw body>`, the value of X-SVC-Signature. */
export function sign(rawBody: string | Buffer, secret: string): string {
  return PREFIX + createHmac('sha256', secret).update(rawBody).digest('hex');
}

/**
 * Verifies a delivery: computes the signature over the exact bytes received (before any JSON
 * parsing) and compares it with the header in constant time. False for a missing or malformed header.
 */
export function verify(rawBody: string | Buffer, signatureHeader: string | string[] | undefined, secret: string): boolean {
  const header = Array.isArray(signatureHeader) ? signatureHeader[0] : signatureHeader;
  if (typeof header !== 'string' || !header.startsWith(PREFIX)) return false;
  const received = Buffer.from(header.slice(PREFIX.length), 'hex');
  const expected = createHmac('sha256', secret).update(rawBody).digest();
  // A malformed hex string decodes short; the length check keeps timingSafeEqual from throwing.
  return received.length === expected.length && timingSafeEqual(received, expected);
}
