import { loadSettings, type CommonSettings, type SettingsReader } from '@svc/platform';
import { parseCidr } from './http/client-address';

/**
 * Every setting of the gateway, parsed once at start from the environment (and `.env`): the
 * common ones (@svc/platform's `CommonSettings`) and these.
 */
export interface GatewayConfig extends CommonSettings {
  /** PORT: the public API (and the internal routes while ADMIN_PORT is unset). Default 3000. */
  port: number;
  /**
   * ADMIN_PORT: when set, `/internal/v1` is served only on this port (0: any free one) and answers
   * 404 on PORT, so the operator's door is not on the public listener. Default unset: on PORT.
   */
  adminPort: number | undefined;
  /** ADMIN_HOST: the address ADMIN_PORT listens on. Default 127.0.0.1 (this machine only). */
  adminHost: string;
  /**
   * ADMIN_ON_PUBLIC_PORT=1: with NODE_ENV=production, serve `/internal/v1` on PORT although
   * ADMIN_PORT is unset (each start warns). Without it, production refuses to start so. Default unset.
   */
  adminOnPublicPort: boolean;
  /** GATEWAY_METRICS_PORT: `/metrics`, `/healthz`, `/readyz`. Default 9101. */
  metricsPort: number;
  /**
   * ADMIN_TOKEN: bearer of `/internal/v1`; while unset every internal route answers 401 (and each
   * start says so). With NODE_ENV=production, at least `MIN_PRODUCTION_ADMIN_TOKEN` characters.
   * Default unset.
   */
  adminToken: string | undefined;
  /** RATE_LIMIT_PER_MINUTE: requests per sliding 60 s window per token. Default 100 (the contract). */
  rateLimitPerMinute: number;
  /**
   * SANDBOX_DAILY_LIMIT: sandbox shipments per company per Guatemala day, against a test token
   * filling the database (docs/integrators.md, The sandbox). Default 10000.
   */
  sandboxDailyLimit: number;
  /**
   * RETENTION_DAYS: activity log entries older than this are removed in small batches
   * (activity/activity.retention.ts); the dispatcher removes old deliveries and events under the
   * same setting. (Idempotency keys go sooner, when they expire at 24 hours.) Default 30.
   */
  retentionDays: number;
  /**
   * PORTAL_BASE_URL: the origin written into portal links (docs/portal.md). Default unset: the link is
   * `http://localhost:{PORT}`, the public port (never ADMIN_PORT: the link is for a customer).
   */
  portalBaseUrl: string | undefined;
  /** PORTAL_LINK_TTL_SECONDS: how long an unused portal link works. Default 600. */
  portalLinkTtlSeconds: number;
  /**
   * PORTAL_FRAME_ANCESTORS: origins (comma- or space-separated) allowed to frame the portal, the
   * CSP's `frame-ancestors`. Default empty: none.
   */
  portalFrameAncestors: string[];
  /**
   * PORTAL_RATE_LIMIT_PER_MINUTE: requests per sliding 60 s window per portal session. Default 300:
   * a page view makes up to six requests, so a person clicking fast stays far below it while a
   * script driving a stolen session is bounded.
   */
  portalRateLimitPerMinute: number;
  /**
   * PORTAL_ASSETS_DIR: the portal's built files (`services/portal`'s `build`). Default: `portal/`
   * beside the bundle (the image), else `services/portal/dist` of the workspace.
   */
  portalAssetsDir: string | undefined;
  /**
   * TRUSTED_PROXIES: addresses or CIDRs (comma-separated) of the proxies in front, whose
   * `X-Forwarded-For` is believed when they are the TCP peer; every per-address limit keys on the
   * client address read that way. Default empty: the TCP peer is the client, the header is ignored.
   */
  trustedProxies: string[];
}

/** An origin as `frame-ancestors` takes it: scheme, host, optional port; nothing that could end the header. */
const FRAME_ORIGIN = /^https?:\/\/(?:\*\.)?[A-Za-z0-9.-]+(?::\d{1,5})?$/;

/**
 * The shortest ADMIN_TOKEN production accepts: it opens every company's tokens, so it must not be
 * guessable within the admin authentication limit; 32 characters of a random generator (e.g.
 * `openssl rand -base64 32`, 44) are far beyond any guessing.
 */
export const MIN_PRODUCTION_ADMIN_TOKEN = 32;

/** What ADMIN_TOKEN may be made of: visible ASCII, one run of it, as a bearer value is. */
export const ADMIN_TOKEN_CHARS = /^[\x21-\x7e]+$/;

export function loadGatewayConfig(env: Record<string, string | undefined> = process.env): GatewayConfig {
  return loadSettings('gateway', env, (r, common) => ({
    port: r.int('PORT', 3000, 0, 65535),
    adminPort: r.optionalInt('ADMIN_PORT', 0, 65535),
    adminHost: r.string('ADMIN_HOST', '127.0.0.1'),
    adminOnPublicPort: readAdminOnPublicPort(r),
    metricsPort: r.int('GATEWAY_METRICS_PORT', 9101, 0, 65535),
    adminToken: readAdminToken(r, common.production),
    rateLimitPerMinute: r.int('RATE_LIMIT_PER_MINUTE', 100, 1, 10_000_000),
    sandboxDailyLimit: r.int('SANDBOX_DAILY_LIMIT', 10_000, 0, 100_000_000),
    retentionDays: r.int('RETENTION_DAYS', 30, 1, 36_500),
    portalBaseUrl: readPortalBaseUrl(r),
    portalLinkTtlSeconds: r.int('PORTAL_LINK_TTL_SECONDS', 600, 1, 86_400),
    portalFrameAncestors: readFrameAncestors(r),
    portalRateLimitPerMinute: r.int('PORTAL_RATE_LIMIT_PER_MINUTE', 300, 1, 10_000_000),
    portalAssetsDir: r.optional('PORTAL_ASSETS_DIR'),
    trustedProxies: readTrustedProxies(r),
  }), checkProduction);
}

/**
 * What production refuses or warns of among the gateway's settings (docs/operations.md, production
 * checklist), once every setting is read.
 */
function checkProduction(r: SettingsReader, config: GatewayConfig): void {
  if (!config.production) return;
  if (config.adminPort === undefined) {
    r.check(
      'ADMIN_PORT',
      config.adminOnPublicPort,
      'required with NODE_ENV=production, so that /internal/v1 is not served on the public PORT (or set ADMIN_ON_PUBLIC_PORT=1 to serve it there on purpose)',
    );
    if (config.adminOnPublicPort) r.warn('ADMIN_ON_PUBLIC_PORT', 'ADMIN_ON_PUBLIC_PORT=1: /internal/v1 is served on the public PORT; keep it behind the operator\'s network boundary');
  } else if (['0.0.0.0', '::', '[::]'].includes(config.adminHost)) {
    r.warn('ADMIN_HOST', `ADMIN_HOST=${config.adminHost}: ADMIN_PORT listens on every interface; make sure no network but the operator's reaches it`);
  }
  if (config.portalBaseUrl === undefined) {
    r.warn('PORTAL_BASE_URL', 'PORTAL_BASE_URL is unset: portal links point at http://localhost, which no customer can open');
  } else {
    r.check('PORTAL_BASE_URL', config.portalBaseUrl.startsWith('https://'), 'must be an https:// URL with NODE_ENV=production: the link carries a secret and the session a cookie');
  }
}

function readPortalBaseUrl(r: SettingsReader): string | undefined {
  const raw = r.optional('PORTAL_BASE_URL');
  if (raw === undefined) return undefined;
  const url = r.url('PORTAL_BASE_URL', raw, ['http:', 'https:']);
  // The origin only: the portal's path is the gateway's to add.
  try {
    return new URL(url).origin;
  } catch {
    return undefined;
  }
}

function readAdminOnPublicPort(r: SettingsReader): boolean {
  const raw = r.optional('ADMIN_ON_PUBLIC_PORT');
  r.check('ADMIN_ON_PUBLIC_PORT', raw === undefined || raw === '1' || raw === '0', 'must be 1 (or 0, unset)');
  return raw === '1';
}

function readTrustedProxies(r: SettingsReader): string[] {
  const items = r.string('TRUSTED_PROXIES', '').split(',').map((i) => i.trim()).filter(Boolean);
  const bad = items.filter((i) => parseCidr(i) === undefined);
  r.check('TRUSTED_PROXIES', bad.length === 0, `addresses or CIDRs like 10.0.0.0/8, separated by commas (not: ${bad.join(' ')})`);
  return bad.length === 0 ? items : [];
}

function readFrameAncestors(r: SettingsReader): string[] {
  const origins = r.string('PORTAL_FRAME_ANCESTORS', '').split(/[\s,]+/).filter(Boolean);
  const bad = origins.filter((o) => !FRAME_ORIGIN.test(o));
  r.check('PORTAL_FRAME_ANCESTORS', bad.length === 0, `origins like https://www.example.com, separated by commas (not: ${bad.join(' ')})`);
  return bad.length === 0 ? origins : [];
}

function readAdminToken(r: SettingsReader, production: boolean): string | undefined {
  const token = r.optional('ADMIN_TOKEN');
  if (token === undefined) {
    r.warn('ADMIN_TOKEN', 'ADMIN_TOKEN is unset: every /internal/v1 route answers 401');
    return undefined;
  }
  // A bearer value is one run of visible characters: a token with others could never be presented.
  r.check('ADMIN_TOKEN', ADMIN_TOKEN_CHARS.test(token), 'must be visible ASCII characters, without spaces');
  if (production) {
    // What is wrong with it only: the value is never repeated.
    r.check('ADMIN_TOKEN', token.length >= MIN_PRODUCTION_ADMIN_TOKEN, `must be at least ${MIN_PRODUCTION_ADMIN_TOKEN} characters with NODE_ENV=production`);
    if (token.length >= MIN_PRODUCTION_ADMIN_TOKEN) {
      const repeated = new Set(token).size === 1;
      r.check('ADMIN_TOKEN', !repeated, 'is one character repeated: use a random value (e.g. `openssl rand -base64 32`)');
      const bits = Math.floor(estimatedEntropyBits(token));
      r.check(
        'ADMIN_TOKEN',
        repeated || bits >= MIN_PRODUCTION_ADMIN_TOKEN_BITS,
        `has about ${bits} bits of entropy, under ${MIN_PRODUCTION_ADMIN_TOKEN_BITS} with NODE_ENV=production: use a random value (e.g. \`openssl rand -base64 32\`)`,
      );
    }
  }
  return token;
}

/** The least estimated entropy production accepts in ADMIN_TOKEN (`estimatedEntropyBits`). */
export const MIN_PRODUCTION_ADMIN_TOKEN_BITS = 128;

/**
 * A token's entropy as its length times the Shannon entropy of its own characters' frequencies: a
 * conservative estimate for a random value (44 characters of `openssl rand -base64 32` give about
 * 215 bits), and a low one for a value made of few characters or repeats of a phrase
 * ("change-me-please-change-me-please", about 106).
 */
export function estimatedEntropyBits(token: string): number {
  const counts = new Map<string, number>();
  for (const ch of token) counts.set(ch, (counts.get(ch) ?? 0) + 1);
  const n = [...token].length;
  let perChar = 0;
  for (const c of counts.values()) perChar -= (c / n) * Math.log2(c / n);
  return perChar * n;
}
