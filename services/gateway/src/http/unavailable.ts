const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOTFOUND', 'EPIPE', 'EAI_AGAIN']);
// Postgres: admin shutdown, crash shutdown, cannot connect now, too many connections, and a
// statement cancelled (DB_STATEMENT_TIMEOUT_MS ran out, or an operator cancelled it): its
// transaction is rolled back, so the request wrote nothing and may be retried.
const PG_UNAVAILABLE = new Set(['57P01', '57P02', '57P03', '53300', '08000', '08001', '08003', '08006', '57014']);

/** True for errors that mean Postgres or Redis cannot be reached (answered 503, not 500). */
export function isUnavailableError(err: unknown): boolean {
  // Duck-typed: errors from other realms (native modules under a test runner) fail instanceof.
  if (typeof err !== 'object' || err === null) return false;
  const { code, name, message } = err as { code?: unknown; name?: unknown; message?: unknown };
  if (typeof code === 'string' && (NETWORK_CODES.has(code) || PG_UNAVAILABLE.has(code))) return true;
  const msg = typeof message === 'string' ? message : '';
  return (
    name === 'MaxRetriesPerRequestError' ||
    /enableOfflineQueue|Connection is closed|Connection terminated|timeout exceeded when trying to connect|connect ECONNREFUSED|Stream isn't writeable|Client has encountered a connection error/i.test(
      msg,
    )
  );
}
