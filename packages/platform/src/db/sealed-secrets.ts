import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { SecretsKey } from '../settings';

/**
 * How a webhook's secrets (`webhooks.secret`, `secreto_anterior`) are stored: sealed with
 * AES-256-GCM under the first key of SECRETS_KEY, so that a backup or a read replica of Postgres
 * is not enough to sign events as the platform. Written once, for both services; no I/O.
 *
 * The stored form is `v1:<keyId>:<base64 of nonce | ciphertext | tag>`: the key id (8 hex digits of
 * the key's SHA-256, `SecretsKey.id`) says which key sealed it, so every key of the list opens what
 * it sealed, whatever its place; a random 96-bit nonce per value; the associated data binds the
 * value to its webhook's id (and to its header), so a sealed value copied into another row does not
 * open there. Both secrets of one row share its id: a rotation moves `secret` into
 * `secreto_anterior` as it is, without opening it.
 */

/** The prefix of every sealed value; anything else in those columns is plaintext from before sealing. */
export const SEALED_PREFIX = 'v1:';

const CIPHER = 'aes-256-gcm';
/** GCM's standard nonce: random per value (2^32 values per key keep the collision risk negligible). */
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const KEY_ID = /^[0-9a-f]{8}$/;
const BODY = /^[A-Za-z0-9+/]+={0,2}$/;

/** Why a stored secret could not be opened. */
export type UnopenedReason =
  /** Sealed under a key that SECRETS_KEY no longer lists. */
  | 'unknown-key'
  /** Not in the sealed form at all (plaintext, or cut short). */
  | 'malformed'
  /** The tag does not verify: altered, or sealed for another webhook. */
  | 'altered';

/**
 * A stored secret that does not open. Its message names the webhook, the reason and the key id,
 * never the value: it is logged.
 */
export class SealedSecretError extends Error {
  constructor(
    readonly webhookId: string,
    readonly reason: UnopenedReason,
    readonly keyId: string | null,
  ) {
    super(
      reason === 'unknown-key'
        ? `webhook ${webhookId}: its secret is sealed under key ${keyId}, which SECRETS_KEY does not list`
        : reason === 'malformed'
          ? `webhook ${webhookId}: its stored secret is not a sealed value`
          : `webhook ${webhookId}: its sealed secret does not verify under key ${keyId} (altered, or not this webhook's)`,
    );
    this.name = 'SealedSecretError';
  }
}

export interface SecretBox {
  /** The id of the key that seals: the first of SECRETS_KEY. */
  readonly sealingKeyId: string;
  /** The ids of every key that opens, the sealing one first. */
  readonly keyIds: readonly string[];
  /** Seals a webhook's secret for its row. */
  seal(webhookId: string, secret: string): string;
  /** Opens a stored value of the webhook's row; throws SealedSecretError when it cannot. */
  open(webhookId: string, stored: string): string;
}

/** The id of the key a stored value names; null when it is not in the sealed form. */
export function sealedKeyIdOf(stored: string): string | null {
  if (!stored.startsWith(SEALED_PREFIX)) return null;
  const keyId = stored.slice(SEALED_PREFIX.length, SEALED_PREFIX.length + 8);
  return KEY_ID.test(keyId) && stored.charAt(SEALED_PREFIX.length + 8) === ':' ? keyId : null;
}

/** True for a value stored before secrets were sealed (every secret the platform issues starts `whsec_`). */
export const isPlaintextSecret = (stored: string): boolean => !stored.startsWith(SEALED_PREFIX);

/** The associated data: the header and the webhook's id, so neither can be swapped. */
const associatedData = (header: string, webhookId: string): Buffer => Buffer.from(`${header}${webhookId.toLowerCase()}`, 'utf8');

/** The box of SECRETS_KEY's keys (`CommonSettings.secretsKeys`): the first seals, every one opens. */
export function createSecretBox(keys: readonly SecretsKey[]): SecretBox {
  const [first] = keys;
  if (first === undefined) throw new Error('SECRETS_KEY: no key to seal with');
  const byId = new Map<string, Buffer>();
  // A key listed twice is one key; the first place it holds is the one that counts.
  for (const k of keys) if (!byId.has(k.id)) byId.set(k.id, k.key);

  return {
    sealingKeyId: first.id,
    keyIds: [...byId.keys()],
    seal(webhookId, secret) {
      const header = `${SEALED_PREFIX}${first.id}:`;
      const nonce = randomBytes(NONCE_BYTES);
      const cipher = createCipheriv(CIPHER, first.key, nonce, { authTagLength: TAG_BYTES });
      cipher.setAAD(associatedData(header, webhookId));
      const body = Buffer.concat([nonce, cipher.update(secret, 'utf8'), cipher.final(), cipher.getAuthTag()]);
      return `${header}${body.toString('base64')}`;
    },
    open(webhookId, stored) {
      const keyId = sealedKeyIdOf(stored);
      if (keyId === null) throw new SealedSecretError(webhookId, 'malformed', null);
      const key = byId.get(keyId);
      if (key === undefined) throw new SealedSecretError(webhookId, 'unknown-key', keyId);
      const header = stored.slice(0, SEALED_PREFIX.length + 9);
      const text = stored.slice(header.length);
      const body = BODY.test(text) ? Buffer.from(text, 'base64') : Buffer.alloc(0);
      if (body.length < NONCE_BYTES + TAG_BYTES + 1) throw new SealedSecretError(webhookId, 'malformed', keyId);
      const decipher = createDecipheriv(CIPHER, key, body.subarray(0, NONCE_BYTES), { authTagLength: TAG_BYTES });
      decipher.setAAD(associatedData(header, webhookId));
      decipher.setAuthTag(body.subarray(body.length - TAG_BYTES));
      try {
        return Buffer.concat([decipher.update(body.subarray(NONCE_BYTES, body.length - TAG_BYTES)), decipher.final()]).toString('utf8');
      } catch {
        throw new SealedSecretError(webhookId, 'altered', keyId);
      }
    },
  };
}
