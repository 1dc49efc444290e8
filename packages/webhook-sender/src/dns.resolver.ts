import { Resolver } from 'node:dns/promises';
import { isIP } from 'node:net';
import { performance } from 'node:perf_hooks';
import { normaliseHostName } from './host-map.parser';

/**
 * The sender's name resolution. Not `dns.lookup`: that runs getaddrinfo on libuv's threadpool (4
 * threads shared with fs, crypto and zlib), cannot be cancelled, and a tenant's domain whose name
 * server never answers would hold those threads while every other tenant's lookups queue behind
 * them. c-ares (node:dns `Resolver`) queries the name servers from the event loop instead, each
 * query on a channel of its own so that giving up on it cancels that query and nothing else.
 */

export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

export interface NameResolverOptions {
  /** Name servers as `ip` or `ip:port` (`[ip]:port` for IPv6). Unset: the system's (resolv.conf). */
  servers?: readonly string[];
  /** The longest a lookup waits for the name servers. Default DEFAULT_DNS_TIMEOUT_MS. */
  timeoutMs?: number;
  /** Names kept in the cache at most. Default 1000. */
  maxEntries?: number;
}

export interface NameResolver {
  /**
   * The addresses of `name`, IPv4 first, from the cache while the answer's TTL lasts. A query that
   * has to go out waits at most `min(timeoutMs, budgetMs)`; concurrent lookups of one name share it.
   * Rejects with a NameResolutionError.
   */
  resolve(name: string, budgetMs?: number): Promise<readonly ResolvedAddress[]>;
  /** Cancels the queries in flight and forgets the cache; later lookups fail. */
  close(): void;
}

export const DEFAULT_DNS_TIMEOUT_MS = 2000;
export const NAME_UNRESOLVED_CODE = 'SVC_NAME_UNRESOLVED';
/** A TTL of 0 would send a query per connection; a day-long one would pin a moved receiver. */
const MIN_TTL_S = 1;
const MAX_TTL_S = 300;
const DEFAULT_MAX_ENTRIES = 1000;

/** A name that could not be turned into addresses, whatever the reason (the name servers included). */
export class NameResolutionError extends Error {
  readonly code = NAME_UNRESOLVED_CODE;
  constructor(
    readonly hostname: string,
    readonly reason: string,
    /** The DNS-level code (ENOTFOUND, ENODATA, ETIMEOUT, ESERVFAIL, ...). */
    readonly dnsCode: string,
  ) {
    super(`cannot resolve ${hostname}: ${reason}`);
    this.name = 'NameResolutionError';
  }
}

/** RFC 6761: `localhost` and its subdomains are always loopback, whatever a name server says. */
const LOOPBACK: readonly ResolvedAddress[] = [
  { address: '127.0.0.1', family: 4 },
  { address: '::1', family: 6 },
];

const seconds = (ms: number): string => `${Number((ms / 1000).toFixed(1))} s`;

const REASONS: Readonly<Record<string, string>> = {
  ENOTFOUND: 'no such name',
  ENODATA: 'the name has no address',
  ESERVFAIL: 'the name server failed',
  EREFUSED: 'the name server refused the query',
  ECONNREFUSED: 'could not contact the name servers',
  EBADNAME: 'not a valid host name',
  ECANCELLED: 'the lookup was cancelled',
};

const codeOf = (err: unknown): string => {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : 'EUNKNOWN';
};

/** Of the two families' failures, the one that says most: a real error before "no such name/address". */
function worstCode(codes: readonly string[]): string {
  const telling = codes.find((c) => c !== 'ENOTFOUND' && c !== 'ENODATA');
  if (telling !== undefined) return telling;
  return codes.includes('ENOTFOUND') ? 'ENOTFOUND' : 'ENODATA';
}

export function createNameResolver(options: NameResolverOptions = {}): NameResolver {
  const timeoutMs = options.timeoutMs ?? DEFAULT_DNS_TIMEOUT_MS;
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) throw new Error('the DNS timeout must be a positive number');
  const maxEntries = options.maxEntries ?? DEFAULT_MAX_ENTRIES;
  const servers = options.servers && options.servers.length > 0 ? [...options.servers] : undefined;
  // A malformed server list fails at creation, not on the first delivery.
  if (servers) new Resolver().setServers(servers);

  const cache = new Map<string, { addresses: readonly ResolvedAddress[]; expires: number }>();
  const inFlight = new Map<string, Promise<readonly ResolvedAddress[]>>();
  const channels = new Set<Resolver>();
  let closed = false;

  const failure = (host: string, code: string, waitedMs: number): NameResolutionError => {
    const reason = code === 'ETIMEOUT' ? `no answer from the name server within ${seconds(waitedMs)}` : (REASONS[code] ?? 'the lookup failed');
    return new NameResolutionError(host, `${reason} (${code})`, code);
  };

  async function query(host: string, budgetMs: number): Promise<readonly ResolvedAddress[]> {
    if (budgetMs < 1) throw failure(host, 'ETIMEOUT', 0);
    // tries: 1, since the timer below ends the lookup anyway; c-ares's own timeout is a backstop.
    const channel = new Resolver({ timeout: Math.ceil(budgetMs), tries: 1 });
    if (servers) channel.setServers(servers);
    channels.add(channel);
    let timedOut = false;
    // c-ares's timer is per try and per server; this one bounds the lookup as a whole.
    const timer = setTimeout(() => {
      timedOut = true;
      channel.cancel();
    }, budgetMs);
    try {
      const [v4, v6] = await Promise.allSettled([channel.resolve4(host, { ttl: true }), channel.resolve6(host, { ttl: true })]);
      const addresses: ResolvedAddress[] = [];
      let ttl = MAX_TTL_S;
      if (v4.status === 'fulfilled') {
        for (const r of v4.value) addresses.push({ address: r.address, family: 4 });
        for (const r of v4.value) ttl = Math.min(ttl, r.ttl);
      }
      if (v6.status === 'fulfilled') {
        for (const r of v6.value) addresses.push({ address: r.address, family: 6 });
        for (const r of v6.value) ttl = Math.min(ttl, r.ttl);
      }
      // One family answering is enough: many names have no AAAA (or no A).
      if (addresses.length === 0) {
        const codes = [v4, v6].map((r) => (r.status === 'rejected' ? codeOf(r.reason) : 'ENODATA'));
        const code = timedOut || codes.includes('ETIMEOUT') ? 'ETIMEOUT' : worstCode(codes);
        throw failure(host, code, budgetMs);
      }
      if (!closed) {
        cache.set(host, { addresses, expires: performance.now() + Math.max(MIN_TTL_S, ttl) * 1000 });
        // Map keeps insertion order and hits are re-inserted, so the first key is the least recently used.
        while (cache.size > maxEntries) cache.delete(cache.keys().next().value!);
      }
      return addresses;
    } finally {
      clearTimeout(timer);
      channels.delete(channel);
    }
  }

  return {
    async resolve(name, budgetMs = timeoutMs) {
      const host = normaliseHostName(name);
      const family = isIP(host);
      if (family === 4 || family === 6) return [{ address: host, family }];
      // c-ares reads no /etc/hosts: the names RFC 6761 reserves are answered here.
      if (host === 'localhost' || host.endsWith('.localhost')) return LOOPBACK;
      if (host === 'invalid' || host.endsWith('.invalid')) throw new NameResolutionError(host, 'no such name (.invalid is reserved) (ENOTFOUND)', 'ENOTFOUND');
      if (closed) throw failure(host, 'ECANCELLED', 0);

      const cached = cache.get(host);
      if (cached !== undefined) {
        cache.delete(host);
        if (cached.expires > performance.now()) {
          cache.set(host, cached);
          return cached.addresses;
        }
      }
      let pending = inFlight.get(host);
      if (pending === undefined) {
        pending = query(host, Math.min(timeoutMs, budgetMs)).finally(() => inFlight.delete(host));
        inFlight.set(host, pending);
      }
      return pending;
    },
    close() {
      closed = true;
      for (const channel of channels) channel.cancel();
      cache.clear();
    },
  };
}
