import { SettingsReader } from '@svc/schema';

/** Every setting of the gateway, parsed once at start (operations.md, "Start and settings"). */
export interface GatewayConfig {
  /** Postgres connection. Default `postgres://postgres@127.0.0.1:5432/svc`. */
  databaseUrl: string;
  /** Redis for rate limits, the token-cache invalidations and the event queue. Default `redis://127.0.0.1:6379`. */
  redisUrl: string;
  /** Prefix of every Redis key and queue, so two stacks can share one Redis. Default `svc`. */
  redisPrefix: string;
  /** Public API and internal routes. Default 3000. */
  port: number;
  /** `/metrics`, `/healthz`, `/readyz`. Default 9101. */
  metricsPort: number;
  /** Bearer of `/internal/v1`; while unset every internal route answers 401. Default unset. */
  adminToken: string | undefined;
  /** Requests per sliding 60 s window per token. Default 100 (the contract). */
  rateLimitPerMinute: number;
  /** Postgres pool size of this process. Default 20. */
  dbPoolSize: number;
  /** pino level: fatal, error, warn, info, debug, trace, silent. Default `info`. */
  logLevel: string;
  /** Host names the PING sender resolves without DNS: `name=address,...`. Default empty. */
  dispatchHostMap: string;
  /** CIDRs exempted from the outbound address guard (tests only). Default empty. */
  dispatchAllowCidrs: string;
}

const LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export function loadGatewayConfig(env: Record<string, string | undefined> = process.env): GatewayConfig {
  const r = new SettingsReader(env);
  const config: GatewayConfig = {
    databaseUrl: r.url('DATABASE_URL', 'postgres://postgres@127.0.0.1:5432/svc', ['postgres:', 'postgresql:']),
    redisUrl: r.url('REDIS_URL', 'redis://127.0.0.1:6379', ['redis:', 'rediss:']),
    redisPrefix: r.string('REDIS_PREFIX', 'svc'),
    port: r.int('PORT', 3000, 0, 65535),
    metricsPort: r.int('GATEWAY_METRICS_PORT', 9101, 0, 65535),
    adminToken: r.optional('ADMIN_TOKEN'),
    rateLimitPerMinute: r.int('RATE_LIMIT_PER_MINUTE', 100, 1, 10_000_000),
    dbPoolSize: r.int('DB_POOL_SIZE', 20, 1, 1000),
    logLevel: r.string('LOG_LEVEL', 'info'),
    dispatchHostMap: r.string('DISPATCH_HOST_MAP', ''),
    dispatchAllowCidrs: r.string('DISPATCH_ALLOW_CIDRS', ''),
  };
  r.check('LOG_LEVEL', LEVELS.includes(config.logLevel), `must be one of ${LEVELS.join(', ')}`);
  r.check('REDIS_PREFIX', /^[A-Za-z0-9_.:-]{1,64}$/.test(config.redisPrefix), 'letters, digits, _ . : - (1-64)');
  r.done('gateway');
  return config;
}
