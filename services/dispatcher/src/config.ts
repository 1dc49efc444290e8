import { SettingsReader } from '@svc/schema';

/** Every setting of the dispatcher, parsed once at start (operations.md, "Start and settings"). */
export interface DispatcherConfig {
  /** Postgres connection. Default `postgres://postgres@127.0.0.1:5432/svc`. */
  databaseUrl: string;
  /** Redis holding the queues. Default `redis://127.0.0.1:6379`. */
  redisUrl: string;
  /** Prefix of every Redis key and queue. Default `svc`. */
  redisPrefix: string;
  /** `/metrics`, `/healthz`, `/readyz`. Default 9102. */
  metricsPort: number;
  /** Deliveries in flight in this process. Default 50. */
  concurrency: number;
  /** Host names the sender resolves without DNS: `name=address,...`. Default empty. */
  dispatchHostMap: string;
  /** CIDRs exempted from the outbound address guard (tests only). Default empty. */
  dispatchAllowCidrs: string;
  /** How long a job stays locked to this process without renewal; a dead process's jobs move on after it. Default 30000 ms. */
  lockDurationMs: number;
  /** Postgres pool size of this process. Default 20. */
  dbPoolSize: number;
  /** pino level. Default `info`. */
  logLevel: string;
}

export function loadDispatcherConfig(env: Record<string, string | undefined> = process.env): DispatcherConfig {
  const r = new SettingsReader(env);
  const config: DispatcherConfig = {
    databaseUrl: r.url('DATABASE_URL', 'postgres://postgres@127.0.0.1:5432/svc', ['postgres:', 'postgresql:']),
    redisUrl: r.url('REDIS_URL', 'redis://127.0.0.1:6379', ['redis:', 'rediss:']),
    redisPrefix: r.string('REDIS_PREFIX', 'svc'),
    metricsPort: r.int('DISPATCHER_METRICS_PORT', 9102, 0, 65535),
    concurrency: r.int('DISPATCHER_CONCURRENCY', 50, 1, 10_000),
    dispatchHostMap: r.string('DISPATCH_HOST_MAP', ''),
    dispatchAllowCidrs: r.string('DISPATCH_ALLOW_CIDRS', ''),
    lockDurationMs: r.int('DISPATCHER_LOCK_DURATION_MS', 30_000, 1000, 600_000),
    dbPoolSize: r.int('DB_POOL_SIZE', 20, 1, 1000),
    logLevel: r.string('LOG_LEVEL', 'info'),
  };
  r.check('REDIS_PREFIX', /^[A-Za-z0-9_.:-]{1,64}$/.test(config.redisPrefix), 'letters, digits, _ . : - (1-64)');
  r.done('dispatcher');
  return config;
}
