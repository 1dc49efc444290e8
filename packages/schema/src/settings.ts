import { existsSync } from 'node:fs';
import { resolve } from 'node:path';

// Node reads NODE_EXTRA_CA_CERTS once, as the process starts; a value that `.env` supplies later
// is not in Node's trust store, so the webhook sender has to add it itself.
const extraCaCertsAtStart = process.env.NODE_EXTRA_CA_CERTS;

/**
 * NODE_EXTRA_CA_CERTS when it was set after the process started (by `loadDotEnv`), so Node did not
 * apply it; undefined when Node already trusts it or it is unset.
 */
export function lateExtraCaCerts(env: Record<string, string | undefined> = process.env): string | undefined {
  const value = env.NODE_EXTRA_CA_CERTS;
  return value === undefined || value === '' || value === extraCaCertsAtStart ? undefined : value;
}

/** Reads `.env` at the workspace root (or the working directory) when present; the environment wins. */
export function loadDotEnv(): void {
  for (const candidate of [resolve(process.cwd(), '.env'), resolve(__dirname, '../../../.env')]) {
    if (existsSync(candidate)) {
      // Node's own loader: it never overrides a variable that is already set.
      process.loadEnvFile(candidate);
      return;
    }
  }
}

type Env = Record<string, string | undefined>;

/** Collects every bad setting before failing, so one start reports them all. */
export class SettingsReader {
  private readonly problems: string[] = [];
  constructor(private readonly env: Env) {}

  string(name: string, fallback: string): string {
    const v = this.env[name];
    return v === undefined || v === '' ? fallback : v;
  }

  optional(name: string): string | undefined {
    const v = this.env[name];
    return v === undefined || v === '' ? undefined : v;
  }

  int(name: string, fallback: number, min: number, max: number): number {
    const raw = this.env[name];
    if (raw === undefined || raw === '') return fallback;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min || n > max) {
      this.problems.push(`${name}=${JSON.stringify(raw)} must be an integer from ${min} to ${max}`);
      return fallback;
    }
    return n;
  }

  url(name: string, fallback: string, protocols: string[]): string {
    const v = this.string(name, fallback);
    try {
      const u = new URL(v);
      if (!protocols.includes(u.protocol)) throw new Error('protocol');
    } catch {
      this.problems.push(`${name} must be a URL starting with ${protocols.map((p) => `${p}//`).join(' or ')}`);
    }
    return v;
  }

  check(name: string, ok: boolean, why: string): void {
    if (!ok) this.problems.push(`${name}: ${why}`);
  }

  /** Throws one error listing every problem found. */
  done(service: string): void {
    if (this.problems.length) {
      throw new Error(`${service}: invalid settings:\n  - ${this.problems.join('\n  - ')}`);
    }
  }
}

/** The levels `LOG_LEVEL` accepts: pino's. */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/**
 * The settings every service reads, under the same names and defaults (the README's settings
 * table); each service's config spreads these and adds its own.
 */
export interface CommonSettings {
  /** DATABASE_URL: the Postgres connection. Default `postgres://postgres@127.0.0.1:5432/svc`. */
  databaseUrl: string;
  /** REDIS_URL: Redis (queues, rate limits, caches). Default `redis://127.0.0.1:6379`. */
  redisUrl: string;
  /**
   * REDIS_PREFIX: prefix of every Redis key and queue, so two stacks can share one Redis. Default
   * `svc`. On a cluster (`REDIS_CLUSTER_NODES`) this is the variable's value as a hash tag,
   * `{svc}`: BullMQ's scripts touch many keys of a queue at once, which a cluster allows only
   * within one slot. The tag is added on a cluster only: on one server the keys (stored data) keep
   * their names.
   */
  redisPrefix: string;
  /**
   * REDIS_CLUSTER_NODES: `host:port,host:port,...` of a Redis Cluster (any of its nodes; the rest are
   * discovered). When set, every Redis client is a cluster client and `REDIS_URL` is ignored.
   * Default unset: one Redis at `REDIS_URL`.
   */
  redisClusterNodes?: Array<{ host: string; port: number }>;
  /** DB_POOL_SIZE: Postgres connections of this process. Default 20. */
  dbPoolSize: number;
  /** LOG_LEVEL: pino level, one of `LOG_LEVELS`. Default `info`. */
  logLevel: string;
  /** DISPATCH_HOST_MAP: host names the webhook sender resolves without DNS, `name=address,...`. Default empty. */
  dispatchHostMap: string;
  /** DISPATCH_ALLOW_CIDRS: CIDRs exempted from the outbound address guard (tests only). Default empty. */
  dispatchAllowCidrs: string;
  /**
   * SHUTDOWN_TIMEOUT_MS: how long a stop (SIGINT, SIGTERM) lets in-flight requests and deliveries
   * finish before the process exits anyway, with code 1. Default 10000.
   */
  shutdownTimeoutMs: number;
}

/**
 * A service's whole config: the common settings and those `readOwn` reads, every problem of both
 * reported at once (a thrown error naming `service`).
 */
export function loadSettings<Own extends object>(service: string, env: Env, readOwn: (r: SettingsReader) => Own): CommonSettings & Own {
  const r = new SettingsReader(env);
  const settings = { ...readCommonSettings(r), ...readOwn(r) };
  r.done(service);
  return settings;
}

/** Reads and checks the common settings; problems go to `r`, reported by its `done()`. */
export function readCommonSettings(r: SettingsReader): CommonSettings {
  const settings: CommonSettings = {
    databaseUrl: r.url('DATABASE_URL', 'postgres://postgres@127.0.0.1:5432/svc', ['postgres:', 'postgresql:']),
    redisUrl: r.url('REDIS_URL', 'redis://127.0.0.1:6379', ['redis:', 'rediss:']),
    redisPrefix: r.string('REDIS_PREFIX', 'svc'),
    redisClusterNodes: readClusterNodes(r),
    dbPoolSize: r.int('DB_POOL_SIZE', 20, 1, 1000),
    logLevel: r.string('LOG_LEVEL', 'info'),
    dispatchHostMap: r.string('DISPATCH_HOST_MAP', ''),
    dispatchAllowCidrs: r.string('DISPATCH_ALLOW_CIDRS', ''),
    shutdownTimeoutMs: r.int('SHUTDOWN_TIMEOUT_MS', 10_000, 1, 3_600_000),
  };
  r.check('LOG_LEVEL', (LOG_LEVELS as readonly string[]).includes(settings.logLevel), `must be one of ${LOG_LEVELS.join(', ')}`);
  r.check('REDIS_PREFIX', /^[A-Za-z0-9_.:-]{1,64}$/.test(settings.redisPrefix), 'letters, digits, _ . : - (1-64)');
  if (settings.redisClusterNodes) settings.redisPrefix = `{${settings.redisPrefix}}`;
  return settings;
}

function readClusterNodes(r: SettingsReader): CommonSettings['redisClusterNodes'] {
  const raw = r.optional('REDIS_CLUSTER_NODES');
  if (raw === undefined) return undefined;
  const nodes = raw.split(',').map((entry) => {
    const m = /^\s*([^\s:,]+):(\d{1,5})\s*$/.exec(entry);
    return m && Number(m[2]) >= 1 && Number(m[2]) <= 65535 ? { host: m[1]!, port: Number(m[2]) } : undefined;
  });
  const valid = nodes.filter((n) => n !== undefined);
  r.check('REDIS_CLUSTER_NODES', valid.length === nodes.length, 'must be host:port,host:port,... (ports 1-65535)');
  return valid.length === nodes.length ? valid : undefined;
}
