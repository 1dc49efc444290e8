import { randomBytes } from 'node:crypto';

// Crockford's base32: no I, L, O or U, so a number read aloud or retyped is not misread.
const ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

/**
 * 'SVC' + 10 random base32 characters (50 bits): short enough to read over the phone, random
 * enough that a collision is rare; the unique index catches the rare one and the creation retries.
 */
export function generateNumeroGuia(): string {
  const bytes = randomBytes(10);
  let out = 'SVC';
  for (const b of bytes) out += ALPHABET[b & 31];
  return out;
}
