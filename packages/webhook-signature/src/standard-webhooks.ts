import { createHmac } from 'node:crypto';

/**
 * The Standard Webhooks signature (github.com/standard-webhooks/standard-webhooks,
 * `spec/standard-webhooks.md`): `v1,<base64 HMAC-SHA256 of "{webhook-id}.{webhook-timestamp}.{body}">`,
 * keyed with the bytes a `whsec_` secret's base64 part decodes to, so that the `standardwebhooks`
 * packages (`new Webhook(secret).verify(rawBody, headers)`) accept every delivery.
 */

export const STANDARD_ID_HEADER = 'webhook-id';
export const STANDARD_TIMESTAMP_HEADER = 'webhook-timestamp';
export const STANDARD_SIGNATURE_HEADER = 'webhook-signature';

const PREFIX = 'whsec_';
// One alphabet or the other (standard, or URL-safe as secrets issued before rotation existed),
// padding optional, and a length base64 can have.
const STANDARD_PART = /^[A-Za-z0-9+/]+={0,2}$/;
const URL_SAFE_PART = /^[A-Za-z0-9_-]+={0,2}$/;

/**
 * The HMAC key of a secret under Standard Webhooks:
 * - `whsec_` + base64 (what the platform issues): the bytes the base64 part decodes to;
 * - `whsec_` + URL-safe base64 (webhooks created before secrets were issued in standard base64):
 *   likewise, the bytes it decodes to;
 * - anything else: the secret's own UTF-8 bytes, as `new Webhook(secret, { format: 'raw' })` of the
 *   `standardwebhooks` package keys it.
 */
export function standardKey(secret: string): Buffer {
  if (secret.startsWith(PREFIX)) {
    const part = secret.slice(PREFIX.length);
    const decodable = part.replace(/=+$/, '').length % 4 !== 1 && (STANDARD_PART.test(part) || URL_SAFE_PART.test(part));
    if (decodable) {
      const key = Buffer.from(part, STANDARD_PART.test(part) ? 'base64' : 'base64url');
      if (key.length > 0) return key;
    }
  }
  return Buffer.from(secret, 'utf8');
}

/**
 * The secret written as Standard Webhooks libraries read it: `whsec_` + the standard base64 of its
 * key. The same string for a secret the platform issues today; for an older one, the form to give
 * `new Webhook(...)` so that it verifies that webhook's deliveries.
 */
export function standardSecret(secret: string): string {
  return PREFIX + standardKey(secret).toString('base64');
}

/**
 * Keys derived from secrets, by secret: deliveries are signed with the same few secrets over and
 * over, and deriving the key on every signature (two pattern tests and a decode) was a measurable
 * share of the dispatcher's busy time (bench/HISTORY.md, "eighth session"). Emptied when full.
 */
const derivedKeys = new Map<string, Buffer>();
const DERIVED_KEYS_KEPT = 1000;

function derivedKey(secret: string): Buffer {
  let key = derivedKeys.get(secret);
  if (key === undefined) {
    if (derivedKeys.size >= DERIVED_KEYS_KEPT) derivedKeys.clear();
    key = standardKey(secret);
    derivedKeys.set(secret, key);
  }
  return key;
}

/** One `v1,<base64>` signature of a delivery, keyed with `secret` as `standardKey` says. */
export function signStandard(id: string, timestampSeconds: number, rawBody: string | Buffer, secret: string): string {
  const mac = createHmac('sha256', derivedKey(secret));
  mac.update(`${id}.${timestampSeconds}.`, 'utf8');
  mac.update(rawBody);
  return `v1,${mac.digest('base64')}`;
}

/**
 * The `webhook-signature` value: one `v1,<base64>` per secret, space-separated, in the order given
 * (the current secret first, then the previous one during a rotation's overlap).
 */
export function standardSignatureHeader(id: string, timestampSeconds: number, rawBody: string | Buffer, secrets: readonly string[]): string {
  return secrets.map((secret) => signStandard(id, timestampSeconds, rawBody, secret)).join(' ');
}
