/** What authentication reports to metrics; kept as an interface so auth does not import prom-client. */
export interface AuthEvents {
  failure(reason: 'missing' | 'scheme' | 'invalid' | 'revoked'): void;
  cache(result: 'hit' | 'miss'): void;
}
