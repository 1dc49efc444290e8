import { createHash, hash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Modo } from '@svc/contracts';

export const TOKEN_PREFIX: Record<Modo, string> = { live: 'svc_live_', test: 'svc_test_' };

/**
 * What a token is (operations.md): `svc_live_` or `svc_test_` and at least 32 random bytes in URL-safe
 * text, so at least 43 characters of base64url. Anything else is refused before any lookup.
 */
export const TOKEN_FORMAT = /^svc_(?:live|test)_[A-Za-z0-9_-]{43,}$/;

/** `svc_live_` / `svc_test_` + 32 random bytes in base64url (43 characters). */
export function generateToken(modo: Modo): string {
  return TOKEN_PREFIX[modo] + randomBytes(32).toString('base64url');
}

/** SHA-256 in hex; the one-shot `hash` spares a Hash object per request (-2% CPU per read, in-process rounds). */
export function hashToken(value: string): string {
  return hash('sha256', value, 'hex');
}

/** Constant-time comparison of two secrets of any length (hashing first equalises the lengths). */
export function safeEqual(a: string, b: string): boolean {
  const ha = createHash('sha256').update(a).digest();
  const hb = createHash('sha256').update(b).digest();
  return timingSafeEqual(ha, hb) && a.length === b.length;
}
