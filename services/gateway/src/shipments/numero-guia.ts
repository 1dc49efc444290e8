import { randomBytes } from 'node:crypto';

// Crockford's base32: no I, L, O or U, so a number read aloud or retyped is not misread.
const ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const LENGTH = 10;

// Random bytes are drawn in blocks: one system call per 400 numbers instead of one per number.
const BLOCK = 4000;
let pool = Buffer.alloc(0);
let offset = 0;

/**
 * 'SVC' + 10 random base32 characters (50 bits): short enough to read over the phone, random
 * enough that a collision is rare; the unique index catches the rare one and the creation retries.
 */
export function generateNumeroGuia(): string {
  if (offset + LENGTH > pool.length) {
    pool = randomBytes(BLOCK);
    offset = 0;
  }
  let out = 'SVC';
  for (let i = 0; i < LENGTH; i++) out += ALPHABET[pool[offset++]! & 31];
  return out;
}

/**
 * Whether `value` could be a number this service issued (letters and digits only): anything else,
 * e.g. a path parameter with a NUL that Postgres would refuse, is simply not found.
 */
export function isPlausibleNumeroGuia(value: string): boolean {
  return /^[0-9A-Za-z]{1,64}$/.test(value);
}
