import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { BlockList, isIP } from 'node:net';
import { resolve } from 'node:path';
import { MAX_QUEUE_SHARDS } from '@svc/contracts';

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

/** What the webhook sender of either service is built from: its part of the common settings. */
export interface SenderSettings {
  hostMap: string;
  allowCidrs: string;
  dnsServers: readonly string[];
  extraCaFile: string | undefined;
}

/** The webhook sender's settings (`createWebhookSender`), the same for the gateway's PINGs and the dispatcher's deliveries. */
export function senderSettings(settings: Pick<CommonSettings, 'dispatchHostMap' | 'dispatchAllowCidrs' | 'dispatchDnsServers'>): SenderSettings {
  return {
    hostMap: settings.dispatchHostMap,
    allowCidrs: settings.dispatchAllowCidrs,
    dnsServers: settings.dispatchDnsServers,
    extraCaFile: lateExtraCaCerts(),
  };
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

/** Something a start must say about its settings without refusing them: logged at warn level at every start. */
export interface StartWarning {
  /** The variable it is about. */
  setting: string;
  message: string;
}

/** Collects every bad setting before failing, so one start reports them all. */
export class SettingsReader {
  private readonly problems: string[] = [];
  readonly warnings: StartWarning[] = [];
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
    return this.optionalInt(name, min, max) ?? fallback;
  }

  /** An integer that may be unset (undefined); a bad value is a problem and reads as unset. */
  optionalInt(name: string, min: number, max: number): number | undefined {
    const raw = this.env[name];
    if (raw === undefined || raw === '') return undefined;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min || n > max) {
      this.problems.push(`${name}=${JSON.stringify(raw)} must be an integer from ${min} to ${max}`);
      return undefined;
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

  /** Accepted, but said at warn level at every start (`CommonSettings.startWarnings`). */
  warn(setting: string, message: string): void {
    this.warnings.push({ setting, message });
  }

  /** Throws one error listing every problem found. */
  done(service: string): void {
    if (this.problems.length) {
      throw new Error(`${service}: invalid settings:\n  - ${this.problems.join('\n  - ')}`);
    }
  }
}

/**
 * The longest a statement of either service may run before Postgres cancels it (its error is the
 * request's 503 or the task's logged failure): a statement that runs away (a plan gone wrong, a
 * lock held by a stuck session) then frees its connection instead of holding a pool slot and
 * Postgres's CPU for ever. 10 s is far above the longest statement the services run by design (a
 * retention batch, which `bench:retention` times) and a third of the gateway's 30 s request
 * timeout, so a request never outlives its statement by long.
 */
export const DEFAULT_STATEMENT_TIMEOUT_MS = 10_000;

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
   * REDIS_PREFIX as given, never hash-tagged: the start of the keys that carry a tag of their own
   * (queue shards past the first layout, the gateway's per-token and per-company keys).
   */
  redisNamespace: string;
  /**
   * QUEUE_SHARDS: how many shards the event and delivery queues are split into, each under its own
   * hash tag (`queueShardPrefixes`), a company's jobs all on one (`shardOf`). Default 1: the queues'
   * keys keep the names they had before shards existed. Every process of a stack must agree: the
   * stack's value is recorded in Postgres and a start with another is refused (`checkQueueShards`).
   */
  queueShards: number;
  /**
   * REDIS_CLUSTER_NODES: `host:port,host:port,...` of a Redis Cluster (any of its nodes; the rest are
   * discovered). When set, every Redis client is a cluster client and `REDIS_URL` is ignored.
   * Default unset: one Redis at `REDIS_URL`.
   */
  redisClusterNodes?: Array<{ host: string; port: number }>;
  /** DB_POOL_SIZE: Postgres connections of this process. Default 20. */
  dbPoolSize: number;
  /**
   * DB_STATEMENT_TIMEOUT_MS: Postgres's `statement_timeout` on every connection of this process's
   * pool (0: none). Default `DEFAULT_STATEMENT_TIMEOUT_MS`.
   */
  dbStatementTimeoutMs: number;
  /**
   * METRICS_HOST: the address the metrics port (`/metrics`, `/healthz`, `/readyz`) listens on.
   * Default 127.0.0.1, this machine only; the images set 0.0.0.0, so that Prometheus and the
   * orchestrator's probes reach it on the containers' network (never publish it).
   */
  metricsHost: string;
  /** LOG_LEVEL: pino level, one of `LOG_LEVELS`. Default `info`. */
  logLevel: string;
  /** DISPATCH_HOST_MAP: host names the webhook sender resolves without DNS, `name=address,...`. Default empty. */
  dispatchHostMap: string;
  /**
   * DISPATCH_ALLOW_CIDRS: CIDRs exempted from the outbound address guard (tests only). Default
   * empty. No range wider than a /8 (IPv4) or a /32 (IPv6); refused with NODE_ENV=production; said
   * at warn level at every start while set.
   */
  dispatchAllowCidrs: string;
  /**
   * DISPATCH_DNS_SERVERS: the name servers the webhook sender resolves hosts with, `ip`, `ip:port`
   * or `[ipv6]:port`, comma-separated. Default empty: the system's resolvers (resolv.conf), and a
   * warning at every start with NODE_ENV=production.
   */
  dispatchDnsServers: readonly string[];
  /**
   * NODE_ENV=production: refuse what is only safe on a developer's machine (a short ADMIN_TOKEN, no
   * SECRETS_KEY, DISPATCH_ALLOW_CIDRS). Default unset: not production.
   */
  production: boolean;
  /**
   * SECRETS_KEY: the keys that seal webhook secrets at rest, comma-separated, each the base64 of 32
   * bytes: the first seals, every one opens, so a key rotates without downtime. Required with
   * NODE_ENV=production; otherwise, unset, the fixed `DEVELOPMENT_SECRETS_KEY` (and a warning at
   * every start).
   */
  secretsKeys: readonly SecretsKey[];
  /** What the start logs at warn level about these settings (runService writes them); not a setting itself. */
  startWarnings: readonly StartWarning[];
  /**
   * SHUTDOWN_TIMEOUT_MS: how long a stop (SIGINT, SIGTERM) lets in-flight requests and deliveries
   * finish before the process exits anyway, with code 1. Default 10000.
   */
  shutdownTimeoutMs: number;
}

/** One key of SECRETS_KEY. */
export interface SecretsKey {
  /**
   * The first 8 hex digits of the key's SHA-256: what a sealed value records to say which key sealed
   * it, whatever the key's position in the list. Reveals nothing usable of a 32-byte random key.
   */
  id: string;
  /** The 32 bytes. */
  key: Buffer;
}

/**
 * The key used when SECRETS_KEY is unset outside production: fixed, so that every process of a
 * development stack (and every restart) opens what another sealed. Public, so never a protection.
 */
export const DEVELOPMENT_SECRETS_KEY: SecretsKey = secretsKey(createHash('sha256').update('svc development secrets key: never in production').digest());

function secretsKey(key: Buffer): SecretsKey {
  return { id: createHash('sha256').update(key).digest('hex').slice(0, 8), key };
}

/** Standard or URL-safe base64 of exactly 32 bytes, padding optional. */
const KEY_BASE64 = /^[A-Za-z0-9+/_-]{43}=?$/;

function readSecretsKeys(r: SettingsReader, production: boolean): readonly SecretsKey[] {
  const raw = r.optional('SECRETS_KEY');
  if (raw === undefined) {
    r.check('SECRETS_KEY', !production, 'required with NODE_ENV=production (comma-separated base64 of 32 random bytes each, e.g. `openssl rand -base64 32`)');
    if (!production) {
      r.warn('SECRETS_KEY', 'SECRETS_KEY is unset: webhook secrets are sealed with the fixed development key, which protects nothing; set SECRETS_KEY outside development');
    }
    return [DEVELOPMENT_SECRETS_KEY];
  }
  const keys: SecretsKey[] = [];
  raw.split(',').forEach((item, i) => {
    const text = item.trim();
    const bytes = KEY_BASE64.test(text) ? Buffer.from(text.replace(/-/g, '+').replace(/_/g, '/'), 'base64') : undefined;
    // The value itself is never repeated: it is a key.
    if (bytes?.length === 32) keys.push(secretsKey(bytes));
    else r.check('SECRETS_KEY', false, `key ${i + 1} of the list is not the base64 of 32 bytes`);
  });
  return keys;
}

/**
 * The widest ranges DISPATCH_ALLOW_CIDRS may exempt: a test needs loopback or one private network,
 * never "everything", which would switch the outbound guard off. An IPv4-mapped IPv6 range counts
 * as the IPv4 range it maps (96 bits more).
 */
export const WIDEST_ALLOWED_PREFIX = { ipv4: 8, ipv6: 32, ipv4Mapped: 96 + 8 } as const;

const IPV4_MAPPED = new BlockList();
IPV4_MAPPED.addSubnet('::ffff:0:0', 96, 'ipv6');

function checkAllowCidrs(r: SettingsReader, value: string, production: boolean): void {
  if (value.trim() === '') return;
  r.check('DISPATCH_ALLOW_CIDRS', !production, 'is for tests only and refused with NODE_ENV=production');
  for (const raw of value.split(',')) {
    const item = raw.trim();
    if (item === '') continue;
    const [address = '', bits, ...rest] = item.split('/');
    const family = isIP(address);
    const max = family === 4 ? 32 : 128;
    const prefix = bits === undefined ? max : /^\d{1,3}$/.test(bits) ? Number(bits) : NaN;
    if (family === 0 || rest.length > 0 || !(prefix >= 0 && prefix <= max)) {
      r.check('DISPATCH_ALLOW_CIDRS', false, `"${item}" is not an IP address or CIDR`);
      continue;
    }
    const mapped = family === 6 && IPV4_MAPPED.check(address, 'ipv6');
    const widest = family === 4 ? WIDEST_ALLOWED_PREFIX.ipv4 : mapped ? WIDEST_ALLOWED_PREFIX.ipv4Mapped : WIDEST_ALLOWED_PREFIX.ipv6;
    r.check('DISPATCH_ALLOW_CIDRS', prefix >= widest, `"${item}" is wider than a /${widest}`);
  }
  r.warn('DISPATCH_ALLOW_CIDRS', `DISPATCH_ALLOW_CIDRS=${value} exempts these ranges from the outbound address guard: for tests only`);
}

/**
 * A service's whole config: the common settings and those `readOwn` reads, then `checkAll`'s rules
 * across them, every problem reported at once (a thrown error naming `service`).
 */
export function loadSettings<Own extends object>(
  service: string,
  env: Env,
  readOwn: (r: SettingsReader, common: CommonSettings) => Own,
  checkAll?: (r: SettingsReader, settings: CommonSettings & Own) => void,
): CommonSettings & Own {
  const r = new SettingsReader(env);
  const common = readCommonSettings(r);
  const settings = { ...common, ...readOwn(r, common) };
  // Rules across settings (production's), once each one is read.
  checkAll?.(r, settings);
  r.done(service);
  // The service's own reader may have added warnings after the common ones.
  settings.startWarnings = [...r.warnings];
  return settings;
}

/** Reads and checks the common settings; problems go to `r`, reported by its `done()`. */
export function readCommonSettings(r: SettingsReader): CommonSettings {
  const production = isProduction(r.optional('NODE_ENV'));
  const settings: CommonSettings = {
    databaseUrl: r.url('DATABASE_URL', 'postgres://postgres@127.0.0.1:5432/svc', ['postgres:', 'postgresql:']),
    redisUrl: r.url('REDIS_URL', 'redis://127.0.0.1:6379', ['redis:', 'rediss:']),
    redisPrefix: r.string('REDIS_PREFIX', 'svc'),
    redisNamespace: r.string('REDIS_PREFIX', 'svc'),
    queueShards: r.int('QUEUE_SHARDS', 1, 1, MAX_QUEUE_SHARDS),
    redisClusterNodes: readClusterNodes(r),
    dbPoolSize: r.int('DB_POOL_SIZE', 20, 1, 1000),
    dbStatementTimeoutMs: r.int('DB_STATEMENT_TIMEOUT_MS', DEFAULT_STATEMENT_TIMEOUT_MS, 0, 3_600_000),
    logLevel: r.string('LOG_LEVEL', 'info'),
    metricsHost: r.string('METRICS_HOST', '127.0.0.1'),
    dispatchHostMap: r.string('DISPATCH_HOST_MAP', ''),
    dispatchAllowCidrs: r.string('DISPATCH_ALLOW_CIDRS', ''),
    dispatchDnsServers: readDnsServers(r),
    shutdownTimeoutMs: r.int('SHUTDOWN_TIMEOUT_MS', 10_000, 1, 3_600_000),
    production,
    secretsKeys: readSecretsKeys(r, production),
    startWarnings: r.warnings,
  };
  checkAllowCidrs(r, settings.dispatchAllowCidrs, production);
  if (production) checkProductionCommon(r, settings);
  r.check('METRICS_HOST', isIP(settings.metricsHost) !== 0, 'must be an IP address (127.0.0.1, 0.0.0.0, ::)');
  r.check('LOG_LEVEL', (LOG_LEVELS as readonly string[]).includes(settings.logLevel), `must be one of ${LOG_LEVELS.join(', ')}`);
  r.check('REDIS_PREFIX', /^[A-Za-z0-9_.:-]{1,64}$/.test(settings.redisPrefix), 'letters, digits, _ . : - (1-64)');
  if (settings.redisClusterNodes) settings.redisPrefix = `{${settings.redisPrefix}}`;
  return settings;
}

/** `production` in any case (`Production`, ` PRODUCTION `): a capital letter must not switch the refusals off. */
function isProduction(nodeEnv: string | undefined): boolean {
  return nodeEnv?.trim().toLowerCase() === 'production';
}

/** What production refuses or warns of among the common settings (docs/operations.md, production checklist). */
function checkProductionCommon(r: SettingsReader, settings: CommonSettings): void {
  // No timeout lets one runaway statement hold a pool slot and Postgres's CPU for ever.
  r.check('DB_STATEMENT_TIMEOUT_MS', settings.dbStatementTimeoutMs !== 0, 'must not be 0 (no timeout) with NODE_ENV=production');
  if (settings.dispatchHostMap.trim() !== '') {
    r.warn('DISPATCH_HOST_MAP', `DISPATCH_HOST_MAP=${settings.dispatchHostMap} pins webhook host names past DNS: for tests and staging, rarely for production`);
  }
  // The system's resolvers usually answer for internal names too, and a PING's DNS reason (no such
  // name) against BLOCKED_ADDRESS (a private one) tells a tenant which of those exist.
  if (settings.dispatchDnsServers.length === 0) {
    r.warn(
      'DISPATCH_DNS_SERVERS',
      "webhook hosts resolve through the system's resolvers: a tenant's PINGs can tell which internal names exist; set DISPATCH_DNS_SERVERS to resolvers that see only public names",
    );
  }
}

/**
 * DISPATCH_DNS_SERVERS as the entries node:dns `setServers` takes: `ip`, `ip:port` (IPv4) or
 * `[ipv6]:port`, a bare IPv6 address too. Checked here, so that a typo refuses the start rather
 * than failing every delivery later.
 */
function readDnsServers(r: SettingsReader): readonly string[] {
  const raw = r.optional('DISPATCH_DNS_SERVERS');
  if (raw === undefined || raw.trim() === '') return [];
  const servers: string[] = [];
  for (const part of raw.split(',')) {
    const item = part.trim();
    if (item === '') continue;
    if (isDnsServer(item)) servers.push(item);
    else r.check('DISPATCH_DNS_SERVERS', false, `"${item}" is not an ip, ip:port or [ipv6]:port (ports 1-65535)`);
  }
  return servers;
}

function isDnsServer(item: string): boolean {
  const validPort = (port: string): boolean => /^\d{1,5}$/.test(port) && Number(port) >= 1 && Number(port) <= 65535;
  if (isIP(item) !== 0) return true;
  const bracketed = /^\[([^\]]+)\]:(\d+)$/.exec(item);
  if (bracketed) return isIP(bracketed[1]!) === 6 && validPort(bracketed[2]!);
  const v4 = /^([^:]+):(\d+)$/.exec(item);
  return v4 !== null && isIP(v4[1]!) === 4 && validPort(v4[2]!);
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
