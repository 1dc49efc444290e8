import type { AttemptErrorClass } from '@svc/contracts';
import { NAME_UNRESOLVED_CODE } from './dns.resolver';
import { BLOCKED_CODE } from './guarded-lookup';

/** How much of a reason is kept. */
export const MAX_MESSAGE_LENGTH = 500;

export type AttemptResult = '2xx' | '3xx' | '4xx' | '5xx' | 'timeout' | 'network' | 'blocked';

type ErrorLike = { message: string; code?: unknown; syscall?: unknown; cause?: unknown; errors?: unknown };

/**
 * Errors are recognised by shape, not `instanceof Error`: Node's own (DNS, sockets, TLS) may come
 * from another realm than this module's (a test runner's sandbox), where instanceof fails.
 */
const isErrorLike = (e: unknown): e is ErrorLike => typeof e === 'object' && e !== null && typeof (e as ErrorLike).message === 'string';

function hasCode(err: unknown, code: string): boolean {
  for (let e: unknown = err, depth = 0; isErrorLike(e) && depth < 5; e = e.cause, depth++) {
    if (e.code === code) return true;
    if (Array.isArray(e.errors) && e.errors.some((inner) => hasCode(inner, code))) return true;
  }
  return false;
}

const TIMEOUT_CODES = ['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT'];
const DNS_CODES = ['ENOTFOUND', 'EAI_AGAIN', 'ENODATA', 'EAI_FAIL', 'EAI_NONAME', 'ESERVFAIL', 'ETIMEOUT'];

/** One of undici's own timeouts, anywhere in the error's chain. */
export const isUndiciTimeout = (err: unknown): boolean => TIMEOUT_CODES.some((code) => hasCode(err, code));

/** The first error in the chain (causes, aggregated errors) that carries a code, else the error itself. */
function codedError(err: unknown, depth = 0): ErrorLike | undefined {
  if (!isErrorLike(err) || depth > 5) return undefined;
  if (typeof err.code === 'string' && !err.code.startsWith('UND_ERR_ABORT')) return err;
  if (Array.isArray(err.errors)) {
    for (const inner of err.errors) {
      const found = codedError(inner, depth + 1);
      if (found) return found;
    }
  }
  return codedError(err.cause, depth + 1) ?? (depth === 0 ? err : undefined);
}

/** At most MAX_MESSAGE_LENGTH characters of one line. */
export const clip = (text: string): string => {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > MAX_MESSAGE_LENGTH ? `${line.slice(0, MAX_MESSAGE_LENGTH - 1)}…` : line;
};

/** The class and reason of a send that got no HTTP status. */
export function failureOf(err: unknown, host: string): { error: AttemptErrorClass; message: string } {
  const e = codedError(err);
  const code = typeof e?.code === 'string' ? e.code : '';
  const text = e?.message ?? String(err);
  if (code === BLOCKED_CODE) return { error: 'BLOCKED_ADDRESS', message: clip(text) };
  // The resolver's own errors already say `cannot resolve <host>: <reason>`.
  if (code === NAME_UNRESOLVED_CODE) return { error: 'DNS', message: clip(text) };
  if (DNS_CODES.includes(code) || e?.syscall === 'getaddrinfo') {
    return { error: 'DNS', message: clip(`cannot resolve ${host}: ${code || text}`) };
  }
  // OpenSSL's and Node's TLS failures: certificate checks (ERR_TLS_*, CERT_*, *_CERT*), handshakes.
  if (/^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO|SELF_SIGNED|HOSTNAME_MISMATCH)/.test(code) || code === 'EPROTO') {
    return { error: 'TLS', message: clip(text) };
  }
  return { error: 'CONNECTION', message: clip(code && !text.includes(code) ? `${text} (${code})` : text) };
}

/** The result of an answer by its status. */
export function classify(statusCode: number): AttemptResult {
  if (statusCode >= 200 && statusCode < 300) return '2xx';
  if (statusCode >= 300 && statusCode < 400) return '3xx';
  if (statusCode >= 400 && statusCode < 500) return '4xx';
  // 1xx never reaches here (undici handles it); anything odd counts as a server failure.
  return '5xx';
}
