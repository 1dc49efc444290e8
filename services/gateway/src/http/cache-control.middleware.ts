import type { RequestHandler } from 'express';

/**
 * `Cache-Control: no-store` on every answer of the API, the internal routes and the portal's API:
 * they carry tokens (issued once), webhook secrets, portal links and session cookies or anti-CSRF
 * tokens, and the rest is one caller's data. No browser, proxy or CDN may keep a copy.
 */
export const noStore: RequestHandler = (_req, res, next) => {
  res.setHeader('Cache-Control', 'no-store');
  next();
};

/** A year: what browsers' preload lists ask of a site; a portal on https never goes back to http. */
export const HSTS_MAX_AGE_SECONDS = 31_536_000;

/**
 * `Strict-Transport-Security` on the portal's pages and API, when it is served over TLS (its
 * PORTAL_BASE_URL is https: TLS ends at the proxy in front): a browser that has seen the portal once
 * never sends its session cookie over plain HTTP again, even to a link typed as `http://`.
 */
export const strictTransport: RequestHandler = (_req, res, next) => {
  res.setHeader('Strict-Transport-Security', `max-age=${HSTS_MAX_AGE_SECONDS}`);
  next();
};
