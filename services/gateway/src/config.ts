import { loadSettings, type CommonSettings } from '@svc/schema';

/**
 * Every setting of the gateway, parsed once at start from the environment (and `.env`): the
 * common ones (@svc/schema's `CommonSettings`) and these.
 */
export interface GatewayConfig extends CommonSettings {
  /** PORT: public API and internal routes. Default 3000. */
  port: number;
  /** GATEWAY_METRICS_PORT: `/metrics`, `/healthz`, `/readyz`. Default 9101. */
  metricsPort: number;
  /** ADMIN_TOKEN: bearer of `/internal/v1`; while unset every internal route answers 401. Default unset. */
  adminToken: string | undefined;
  /** RATE_LIMIT_PER_MINUTE: requests per sliding 60 s window per token. Default 100 (the contract). */
  rateLimitPerMinute: number;
  /**
   * SANDBOX_DAILY_LIMIT: sandbox shipments per company per Guatemala day, against a test token
   * filling the database (extensions.md, Sandbox parity). Default 10000.
   */
  sandboxDailyLimit: number;
  /**
   * RETENTION_DAYS: idempotency keys claimed longer ago than this (all long expired: a key may be
   * taken over after 24 hours) are removed in small batches (idempotency/idempotency.retention.ts).
   * The dispatcher removes old deliveries and events under the same setting. Default 30.
   */
  retentionDays: number;
}

export function loadGatewayConfig(env: Record<string, string | undefined> = process.env): GatewayConfig {
  return loadSettings('gateway', env, (r) => ({
    port: r.int('PORT', 3000, 0, 65535),
    metricsPort: r.int('GATEWAY_METRICS_PORT', 9101, 0, 65535),
    adminToken: r.optional('ADMIN_TOKEN'),
    rateLimitPerMinute: r.int('RATE_LIMIT_PER_MINUTE', 100, 1, 10_000_000),
    sandboxDailyLimit: r.int('SANDBOX_DAILY_LIMIT', 10_000, 0, 100_000_000),
    retentionDays: r.int('RETENTION_DAYS', 30, 1, 36_500),
  }));
}
