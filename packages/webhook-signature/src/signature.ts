import { createHmac, timingSafeEqual } from 'node:crypto';

/** Header that carries `sha256=<hex>` of the raw body, keyed with the webhook's secret. */
export const SIGNATURE_HEADER = 'X-SVC-Signature';
/** During a secret rotation's overlap: the same `sha256=<hex>`, keyed with the previous secret. */
export const PREVIOUS_SIGNATURE_HEADER = 'X-SVC-Signature-Anterior';
const PREFIX = 'sha256=';
const HEADER_SHAPE = /^sha256=[0-9a-fA-F]{64}$/;

/** `sha256=<hex HMAC-SHA256 of the exact raw body>`, the value of X-SVC-Signature. */
export function sign(rawBody: string | Buffer, secret: string): string {
  return PREFIX + createHmac('sha256', secret).update(rawBody).digest('hex');
}

/**
 * Verifies a delivery: computes the signature over the exact bytes received (before any JSON
 * parsing) and compares it with the header in constant time. False for a missing or malformed
 * header, and for an empty secret.
 */
export function verify(rawBody: string | Buffer, signatureHeader: string | string[] | undefined, secret: string): boolean {
  const header = Array.isArray(signatureHeader) ? signatureHeader[0] : signatureHeader;
  // Buffer.from(hex) stops quietly at the first non-hex character, so the shape is checked first:
  // otherwise a valid signature followed by junk would pass. The shape is public; only the
  // comparison of the digits needs constant time.
  if (typeof header !== 'string' || !HEADER_SHAPE.test(header)) return false;
  // An empty key is a receiver's misconfiguration (an unset variable); refuse everything then.
  if (secret === '') return false;
  const received = Buffer.from(header.slice(PREFIX.length), 'hex');
  const expected = createHmac('sha256', secret).update(rawBody).digest();
  return received.length === expected.length && timingSafeEqual(received, expected);
}
