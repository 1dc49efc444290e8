import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import express, { type RequestHandler, type Response } from 'express';
import { AppError } from '@svc/contracts';
import type { GatewayConfig } from '../config';
import { PORTAL_PATH } from './portal-session.service';

/** Vite's hashed build output: a name never changes content, so a browser may keep it for a year. */
const ASSETS_PREFIX = '/assets/';
const IMMUTABLE = 'public, max-age=31536000, immutable';

/**
 * Where the built portal is: PORTAL_ASSETS_DIR; else `portal/` beside the bundle (dist/main.js, the
 * image: the gateway's build copies it there); else the workspace's `services/portal/dist` (sources
 * run through tsx, `pnpm start`).
 */
export function portalAssetsDir(config: Pick<GatewayConfig, 'portalAssetsDir'>): string {
  if (config.portalAssetsDir) return resolve(config.portalAssetsDir);
  const candidates = [join(__dirname, 'portal'), resolve(__dirname, '../../../portal/dist')];
  return candidates.find((dir) => existsSync(join(dir, 'index.html'))) ?? candidates[candidates.length - 1]!;
}

/**
 * The portal page's policy: scripts, styles and requests from this origin only, no inline script or
 * style element, no plugin, framed only by PORTAL_FRAME_ANCESTORS (none by default).
 */
export function contentSecurityPolicy(frameAncestors: readonly string[]): string {
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    "font-src 'self'",
    "connect-src 'self'",
    "manifest-src 'self'",
    "base-uri 'none'",
    "form-action 'self'",
    `frame-ancestors ${frameAncestors.length > 0 ? frameAncestors.join(' ') : "'none'"}`,
  ].join('; ');
}

/**
 * Serves the built portal under `/portal/`: hashed assets cached for good, every other path the app's
 * own page (its router draws the rest), never cached, with the security headers. A plain middleware,
 * not a router: it adds no API route.
 */
export function portalStatic(config: Pick<GatewayConfig, 'portalAssetsDir' | 'portalFrameAncestors'>): RequestHandler {
  const dir = portalAssetsDir(config);
  const csp = contentSecurityPolicy(config.portalFrameAncestors);
  const pageHeaders = (res: Response): void => {
    res.setHeader('Content-Security-Policy', csp);
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('Referrer-Policy', 'no-referrer');
    res.setHeader('Cross-Origin-Opener-Policy', 'same-origin');
    // Browsers without frame-ancestors: no framing at all when no origin may frame it.
    if (config.portalFrameAncestors.length === 0) res.setHeader('X-Frame-Options', 'DENY');
  };
  const files = express.static(dir, {
    index: false,
    redirect: false,
    fallthrough: true,
    setHeaders: (res, path) => {
      res.setHeader('X-Content-Type-Options', 'nosniff');
      res.setHeader('Cache-Control', path.startsWith(join(dir, 'assets')) ? IMMUTABLE : 'no-cache');
    },
  });
  const page: RequestHandler = (req, res, next) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') return next();
    // A missing asset is a 404, not the page: a script tag must never get HTML.
    if (req.path.startsWith(ASSETS_PREFIX)) return next();
    const index = join(dir, 'index.html');
    if (!existsSync(index)) return next(new AppError('SERVICE_UNAVAILABLE', 'the portal is not built: run `pnpm build` (or `pnpm start`, which builds it)'));
    pageHeaders(res);
    res.sendFile(index, { headers: { 'Cache-Control': 'no-cache' }, lastModified: false, etag: false }, (err) => {
      if (err) next(err);
    });
  };
  return (req, res, next) => {
    // `/portal` itself: the app lives under `/portal/` (its relative URLs and the cookie's path).
    if (req.originalUrl === PORTAL_PATH || req.originalUrl.startsWith(`${PORTAL_PATH}?`)) {
      res.redirect(301, `${PORTAL_PATH}/`);
      return;
    }
    if (req.path === '/' || !req.path.startsWith(ASSETS_PREFIX)) {
      // The page for every app path (index.html itself included); other files of the build root as files.
      if (req.path !== '/' && req.path !== '/index.html' && /^\/[^/]+\.[a-z0-9]+$/i.test(req.path)) return files(req, res, () => page(req, res, next));
      return page(req, res, next);
    }
    files(req, res, () => next());
  };
}
