/** What authentication reports to metrics; kept as an interface so auth does not import prom-client. */
export interface AuthEvents {
  failure(reason: 'missing' | 'scheme' | 'invalid' | 'revoked'): void;
  cache(result: 'hit' | 'miss'): void;
  /** A refusal at `/internal/v1`: `wrong` a wrong token answered 401, `limited` one past the address's limit (429). */
  adminFailure(reason: 'missing' | 'scheme' | 'malformed' | 'wrong' | 'limited'): void;
  /** A request refused 429 by a per-address limit before any lookup: failed API authentications, or portal session creations. */
  addressLimited(door: 'api' | 'portal_session'): void;
}
