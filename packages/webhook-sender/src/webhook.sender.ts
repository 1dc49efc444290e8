import type { LookupAddress, LookupOptions } from 'node:dns';
import { readFileSync } from 'node:fs';
import { isIP, type LookupFunction } from 'node:net';
import { createSecureContext, rootCertificates, type SecureContext } from 'node:tls';
import { STATUS_CODES } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { AttemptErrorClass } from '@svc/contracts';
import { Agent, buildConnector, type Dispatcher } from 'undici';
import { guardedRange, isAllowed, parseCidrs, parseIp, refusedHostMessage, type AllowList } from './address.guard';
import { normaliseHostName, parseHostMap } from './host-map.parser';
import { answersAsRefused, createNameResolver, DEFAULT_DNS_TIMEOUT_MS, NAME_UNRESOLVED_CODE, NameResolutionError, type ResolvedAddress } from './dns.resolver';

export type AttemptResult = '2xx' | '3xx' | '4xx' | '5xx' | 'timeout' | 'network' | 'blocked';

/** How much of a reason or an answer is kept. */
export const MAX_MESSAGE_LENGTH = 500;
export const MAX_RESPONSE_LENGTH = 1024;

export interface SendOutcome {
  /** True only for a 2xx whose response finished within the timeout. */
  ok: boolean;
  /** 0 when no HTTP status came back (timeout, refused, reset, TLS error, blocked address). */
  statusCode: number;
  durationMs: number;
  result: AttemptResult;
  /** null for a success. */
  error: AttemptErrorClass | null;
  /** A human-readable reason (at most 500 characters, never a stack trace); null for a success. */
  message: string | null;
  /** The first 1024 characters of the answer's body as text, whatever its status; null when no answer came. */
  response: string | null;
}

export interface WebhookSender {
  /** One POST, never retried here (retries belong to the caller) and never redirected. */
  send(url: string, body: string, headers: Record<string, string>): Promise<SendOutcome>;
  /** Waits for sends in flight, then closes every kept-alive connection. */
  close(): Promise<void>;
}

export interface SenderOptions {
  /** DISPATCH_HOST_MAP: `name=address,...`, resolved before DNS. */
  hostMap: string;
  /** DISPATCH_ALLOW_CIDRS: ranges exempted from the address guard (tests only). */
  allowCidrs: string;
  /**
   * The whole attempt (resolve, connect, TLS, headers, body), a hard deadline: the outcome is
   * decided when it passes, whatever is still under way. Default 5000, the contract's.
   */
  timeoutMs?: number;
  /**
   * Name servers (`ip` or `ip:port`) to resolve webhook hosts with. Unset: the system's. Tests point
   * it at a fake server on loopback.
   */
  dnsServers?: readonly string[];
  /**
   * The longest a name lookup waits for the name servers, and never past the attempt's deadline.
   * Default: 2000 ms, or half of timeoutMs when that is shorter, so that a silent name server is
   * reported as such (DNS) rather than as the attempt's timeout.
   */
  dnsTimeoutMs?: number;
  /**
   * Connections kept per origin. Default: no cap, so the caller's own concurrency
   * (DISPATCHER_CONCURRENCY) bounds it; a cap would make sends queue inside the sender and spend
   * their timeout waiting for a connection to a slow receiver.
   */
  connectionsPerOrigin?: number;
  /**
   * A PEM file of certificate authorities trusted besides Node's own, for NODE_EXTRA_CA_CERTS read
   * from `.env` (too late for Node itself to apply). Unset: Node's default trust store.
   */
  extraCaFile?: string;
}

export const DEFAULT_TIMEOUT_MS = 5000;
/** How long a lookup outlives the deadline of the attempts waiting for it (then it is cancelled). */
const LOOKUP_GRACE_MS = 50;
/** Response bodies are drained (so the connection can carry the next delivery) up to this size. */
const MAX_DRAINED_BODY = 64 * 1024;
const BLOCKED_CODE = 'SVC_ADDRESS_BLOCKED';

/**
 * Raised inside the connector when the address guard refuses the resolved address. Its message is
 * what the delivery log (`mensaje`) and the PING's record show the tenant, so it is the same whatever
 * the range and names neither the address nor the range (extensions.md): a tenant must not map the
 * operator's private network through PINGs. The address and range stay on the error, unlogged.
 */
export class BlockedAddressError extends Error {
  readonly code = BLOCKED_CODE;
  constructor(
    host: string,
    readonly address: string,
    readonly range: string,
  ) {
    super(refusedHostMessage(host));
    this.name = 'BlockedAddressError';
  }
}

type ErrorLike = { message: string; code?: unknown; syscall?: unknown; cause?: unknown; errors?: unknown };

/**
 * Errors are recognised by shape, not `instanceof Error`: Node's own (DNS, sockets, TLS) may come
 * from another realm than this module's (a test runner's sandbox), where instanceof fails.
 */
const isErrorLike = (e: unknown): e is ErrorLike => typeof e === 'object' && e !== null && typeof (e as ErrorLike).message === 'string';

function hasCode(err: unknown, code: string): boolean {
  for (let e: unknown = err, depth = 0; isErrorLike(e) && depth < 5; e = e.cause, depth++) {
    if (e.code === code) return true;
    if (Array.isArray(e.errors) && e.errors.some((inner) => hasCode(inner, code))) return true;
  }
  return false;
}

const TIMEOUT_CODES = ['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT'];
const DNS_CODES = ['ENOTFOUND', 'EAI_AGAIN', 'ENODATA', 'EAI_FAIL', 'EAI_NONAME', 'ESERVFAIL', 'ETIMEOUT'];

/** The first error in the chain (causes, aggregated errors) that carries a code, else the error itself. */
function codedError(err: unknown, depth = 0): ErrorLike | undefined {
  if (!isErrorLike(err) || depth > 5) return undefined;
  if (typeof err.code === 'string' && !err.code.startsWith('UND_ERR_ABORT')) return err;
  if (Array.isArray(err.errors)) {
    for (const inner of err.errors) {
      const found = codedError(inner, depth + 1);
      if (found) return found;
    }
  }
  return codedError(err.cause, depth + 1) ?? (depth === 0 ? err : undefined);
}

/** At most MAX_MESSAGE_LENGTH characters of one line. */
const clip = (text: string): string => {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > MAX_MESSAGE_LENGTH ? `${line.slice(0, MAX_MESSAGE_LENGTH - 1)}…` : line;
};

/** The class and reason of a send that got no HTTP status. */
function failureOf(err: unknown, host: string): { error: AttemptErrorClass; message: string } {
  const e = codedError(err);
  const code = typeof e?.code === 'string' ? e.code : '';
  const text = e?.message ?? String(err);
  if (code === BLOCKED_CODE) return { error: 'BLOCKED_ADDRESS', message: clip(text) };
  // A name without an address reads as a refused one (NO_ADDRESS_CODES); the resolver's other
  // errors already say `cannot resolve <host>: <reason>`.
  if (e !== undefined && answersAsRefused(e)) return { error: 'BLOCKED_ADDRESS', message: clip(refusedHostMessage(host)) };
  if (code === NAME_UNRESOLVED_CODE) return { error: 'DNS', message: clip(text) };
  if (DNS_CODES.includes(code) || e?.syscall === 'getaddrinfo') {
    return { error: 'DNS', message: clip(`cannot resolve ${host}: ${code || text}`) };
  }
  // OpenSSL's and Node's TLS failures: certificate checks (ERR_TLS_*, CERT_*, *_CERT*), handshakes.
  if (/^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO|SELF_SIGNED|HOSTNAME_MISMATCH)/.test(code) || code === 'EPROTO') {
    return { error: 'TLS', message: clip(text) };
  }
  return { error: 'CONNECTION', message: clip(code && !text.includes(code) ? `${text} (${code})` : text) };
}

/**
 * What has come of an exchange so far, and the means to cut it short. Kept outside the handler so
 * that the deadline can report it (a failure's status and the start of its body) and abort it.
 */
interface Exchange {
  /** 0 until the status line arrived. */
  statusCode: number;
  kept: Buffer[];
  keptBytes: number;
  /** The deadline passed: the request is aborted, or will be as soon as it reaches a connection. */
  aborted: boolean;
  /** undici's handle on the request once it is on a connection; null before. */
  controller: Dispatcher.DispatchController | null;
}

// A UTF-8 character is at most 4 bytes: this many bytes hold MAX_RESPONSE_LENGTH characters.
const KEPT_BYTES = MAX_RESPONSE_LENGTH * 4;
const utf8 = new TextDecoder();

/** The first MAX_RESPONSE_LENGTH characters of what was kept of the body. */
function excerptOf(answer: Exchange): string {
  if (answer.keptBytes === 0) return '';
  const decoded = utf8.decode(Buffer.concat(answer.kept).subarray(0, KEPT_BYTES));
  // Code points, not UTF-16 units, so a character is never cut in half; a text of at most that
  // many units (the usual short answer) has at most that many code points and is kept as it is.
  return decoded.length <= MAX_RESPONSE_LENGTH ? decoded : [...decoded].slice(0, MAX_RESPONSE_LENGTH).join('');
}

/** Why the sender itself cut an exchange short. */
class ExchangeCut extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ExchangeCut';
  }
}

function classify(statusCode: number): AttemptResult {
  if (statusCode >= 200 && statusCode < 300) return '2xx';
  if (statusCode >= 300 && statusCode < 400) return '3xx';
  if (statusCode >= 400 && statusCode < 500) return '4xx';
  // 1xx never reaches here (undici handles it); anything odd counts as a server failure.
  return '5xx';
}

/** The address the guard refuses for this host, or null when every address is acceptable. */
function refusal(host: string, addresses: readonly string[], allow: AllowList): BlockedAddressError | null {
  if (addresses.length === 0) return new BlockedAddressError(host, '(nothing)', 'missing');
  for (const text of addresses) {
    const address = parseIp(text);
    if (address === undefined) return new BlockedAddressError(host, text, 'unparseable');
    const range = guardedRange(address);
    if (range !== null && !isAllowed(address, allow)) return new BlockedAddressError(host, text, range);
  }
  return null;
}

/** Asks for a name's addresses; rejects when it cannot tell them. */
export type ResolveName = (hostname: string) => Promise<readonly ResolvedAddress[]>;

const wantedFamily = (family: LookupOptions['family']): 0 | 4 | 6 => {
  if (family === 4 || family === 'IPv4') return 4;
  if (family === 6 || family === 'IPv6') return 6;
  return 0;
};

/**
 * The connector's `lookup`: DISPATCH_HOST_MAP first, then `resolve` with every address, each vetted.
 * Node connects to exactly what this returns, so the address checked is the address used (no second
 * lookup that a rebinding DNS server could answer differently). A name with any guarded address is
 * refused as a whole rather than filtered, since a mixed answer is itself suspicious.
 */
export function createGuardedLookup(hostMap: ReadonlyMap<string, string>, allow: AllowList, resolve: ResolveName): LookupFunction {
  return (hostname, options: LookupOptions, callback) => {
    const answer = (found: readonly ResolvedAddress[]): void => {
      const blocked = refusal(hostname, found.map((a) => a.address), allow);
      if (blocked !== null) {
        callback(blocked, '', 0);
        return;
      }
      const family = wantedFamily(options.family);
      // Vetted as a whole above; only then narrowed to the family the socket asked for.
      const addresses: LookupAddress[] = found.filter((a) => family === 0 || a.family === family).map((a) => ({ address: a.address, family: a.family }));
      const first = addresses[0];
      if (first === undefined) callback(new NameResolutionError(hostname, `no IPv${family} address (ENODATA)`, 'ENODATA'), '', 0);
      else if (options.all === true) callback(null, addresses);
      else callback(null, first.address, first.family);
    };
    const mapped = hostMap.get(normaliseHostName(hostname));
    if (mapped !== undefined) {
      // net expects the lookup to answer asynchronously, as DNS would.
      process.nextTick(answer, [{ address: mapped, family: isIP(mapped) === 6 ? 6 : 4 }]);
      return;
    }
    // The callbacks run on a tick of their own: what net does with the answer is not the promise's business.
    void resolve(hostname).then(
      (found) => process.nextTick(answer, found),
      (err: unknown) => process.nextTick(callback, err as NodeJS.ErrnoException, '', 0),
    );
  };
}

/** Node's bundled authorities plus those of `file`: what NODE_EXTRA_CA_CERTS gives when set at start. */
function trustingAlso(file: string): SecureContext {
  let pem: string;
  try {
    pem = readFileSync(file, 'utf8');
  } catch (err) {
    throw new Error(`NODE_EXTRA_CA_CERTS: cannot read ${file}: ${(err as Error).message}`);
  }
  return createSecureContext({ ca: [...rootCertificates, pem] });
}

/**
 * The guarded HTTPS sender: an undici Agent keeps connections alive per origin (TLS is negotiated
 * once per connection, and resumed from the session cache for new ones); every new connection
 * resolves and vets its host in the connector, so no connection to a guarded address is ever opened.
 *
 * Every attempt has a hard deadline: its outcome is whichever comes first of the work and a timer
 * of timeoutMs started with it. When the timer wins, the work is aborted and left to wind down in
 * the background; undici's own timeouts (a coarse clock that fires late) only back that cleanup up.
 */
export function createWebhookSender(options: SenderOptions): WebhookSender {
  const hostMap = parseHostMap(options.hostMap);
  const allow = parseCidrs(options.allowCidrs);
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) throw new Error('timeoutMs must be a positive number');
  const dnsTimeoutMs = options.dnsTimeoutMs ?? Math.min(DEFAULT_DNS_TIMEOUT_MS, timeoutMs / 2);
  const resolver = createNameResolver({ servers: options.dnsServers, timeoutMs: dnsTimeoutMs });

  // The deadlines of the attempts in flight, per host name. A connection is opened for its origin,
  // not for one attempt, so its lookup may take as long as the last attempt waiting for that host
  // has left, and no longer.
  const deadlines = new Map<string, number[]>();
  const awaitHost = (hostname: string, deadline: number): (() => void) => {
    const name = normaliseHostName(hostname);
    const list = deadlines.get(name) ?? [];
    list.push(deadline);
    deadlines.set(name, list);
    return () => {
      list.splice(list.indexOf(deadline), 1);
      if (list.length === 0) deadlines.delete(name);
    };
  };
  const lookupBudget = (hostname: string): number => {
    const list = deadlines.get(normaliseHostName(hostname));
    if (list === undefined) return dnsTimeoutMs;
    // A little past the latest deadline: when the deadline is what cuts the lookup short, the
    // attempt's own timer must fire first and call it a TIMEOUT (with the two at the same instant,
    // the lookup's timer sometimes won and the attempt was called a DNS failure).
    return list.reduce((latest, d) => Math.max(latest, d), -Infinity) - performance.now() + LOOKUP_GRACE_MS;
  };

  const connectVetted = buildConnector({
    // Closes a connection that no attempt can use any more (they all ended at their deadline).
    timeout: timeoutMs,
    lookup: createGuardedLookup(hostMap, allow, (hostname) => resolver.resolve(hostname, lookupBudget(hostname))),
    ...(options.extraCaFile ? { secureContext: trustingAlso(options.extraCaFile) } : {}),
  });
  const agent = new Agent({
    connect(opts, callback) {
      // net.connect does not call `lookup` for an IP literal, so such hosts are vetted here.
      const literal = parseIp(opts.hostname);
      if (literal !== undefined) {
        const blocked = refusal(opts.hostname, [literal.toString()], allow);
        if (blocked !== null) {
          callback(blocked, null);
          return;
        }
      }
      connectVetted(opts, callback);
    },
    connections: options.connectionsPerOrigin ?? null,
    pipelining: 1,
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
  });

  const seconds = `${timeoutMs / 1000} s`;
  const outcome = (
    started: number,
    result: AttemptResult,
    detail: { statusCode?: number; error?: AttemptErrorClass | null; message?: string | null; response?: string | null } = {},
  ): SendOutcome => ({
    ok: result === '2xx',
    statusCode: detail.statusCode ?? 0,
    durationMs: Math.round(performance.now() - started),
    result,
    error: detail.error ?? null,
    message: detail.message ?? null,
    response: detail.response ?? null,
  });
  const timedOutAfter = (started: number): SendOutcome =>
    outcome(started, 'timeout', { error: 'TIMEOUT', message: `no answer within ${seconds}` });
  const answered = (started: number, statusCode: number, response: string): SendOutcome => {
    const result = classify(statusCode);
    return outcome(started, result, {
      statusCode,
      error: result === '2xx' ? null : 'HTTP_STATUS',
      message: result === '2xx' ? null : clip(`the receiver answered ${statusCode} ${STATUS_CODES[statusCode] ?? ''}`),
      response,
    });
  };

  /**
   * The request and its answer, up to the end of the body; never rejects. The body is kept up to
   * KEPT_BYTES and drained (so the connection can carry the next delivery) up to MAX_DRAINED_BODY,
   * past which the answer counts as ended and its connection is closed.
   *
   * Through undici's dispatch handler rather than `request()`: no response stream, async iterator,
   * AbortSignal or async resource per attempt. Alone, 72-76 -> 37-53 µs of CPU per POST in a loop
   * over keep-alive TLS; in the dispatcher bench at 200/s, see bench/README.md ("eighth session").
   */
  function exchange(target: URL, body: string, headers: Record<string, string>, started: number, answer: Exchange): Promise<SendOutcome> {
    return new Promise((resolve) => {
      let seen = 0;
      const brokeOff = (err: unknown): void => {
        if (answer.aborted || TIMEOUT_CODES.some((code) => hasCode(err, code))) return resolve(timedOutAfter(started));
        // A failure's status stands, whatever became of its body; a 2xx counts only once its whole answer came.
        if (answer.statusCode !== 0) {
          if (classify(answer.statusCode) !== '2xx') return resolve(answered(started, answer.statusCode, excerptOf(answer)));
          return resolve(outcome(started, 'network', failureOf(new Error('the answer broke off'), target.hostname)));
        }
        const failure = failureOf(err, target.hostname);
        resolve(outcome(started, failure.error === 'BLOCKED_ADDRESS' ? 'blocked' : 'network', failure));
      };
      const handler: Dispatcher.DispatchHandler = {
        onRequestStart(controller) {
          answer.controller = controller;
          if (answer.aborted) controller.abort(new ExchangeCut(`no answer within ${seconds}`));
        },
        onResponseStart(_controller, statusCode) {
          answer.statusCode = statusCode;
        },
        onResponseData(controller, chunk) {
          seen += chunk.length;
          if (answer.keptBytes < KEPT_BYTES) {
            answer.kept.push(chunk);
            answer.keptBytes += chunk.length;
          }
          if (seen > MAX_DRAINED_BODY) {
            // Long enough: the answer stands as it is, and its connection is closed rather than drained.
            resolve(answered(started, answer.statusCode, excerptOf(answer)));
            controller.abort(new ExchangeCut('the answer is longer than the sender drains'));
          }
        },
        onResponseEnd() {
          resolve(answered(started, answer.statusCode, excerptOf(answer)));
        },
        onResponseError(_controller, err) {
          brokeOff(err);
        },
      };
      try {
        agent.dispatch({ origin: target.origin, path: target.pathname + target.search, method: 'POST', headers, body }, handler);
      } catch (err) {
        brokeOff(err);
      }
    });
  }

  async function send(url: string, body: string, headers: Record<string, string>): Promise<SendOutcome> {
    const started = performance.now();
    let target: URL;
    try {
      target = new URL(url);
    } catch {
      return outcome(started, 'blocked', { error: 'BLOCKED_ADDRESS', message: 'the url is not a valid URL' });
    }
    if (target.protocol !== 'https:' || target.username !== '' || target.password !== '') {
      return outcome(started, 'blocked', { error: 'BLOCKED_ADDRESS', message: 'the url is not an https:// URL without user information' });
    }

    const answer: Exchange = { statusCode: 0, kept: [], keptBytes: 0, aborted: false, controller: null };
    const release = awaitHost(target.hostname, started + timeoutMs);
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<SendOutcome>((resolve) => {
      const expire = (): void => {
        // Timers count from the event loop's cached clock, which can lag the real one by the
        // loop's current turn: such a timer fires a little early, and waits out the rest here.
        const left = started + timeoutMs - performance.now();
        if (left > 0) {
          timer = setTimeout(expire, left);
          return;
        }
        // A failure's status already decided the outcome; only the rest of its body is cut short.
        const failed = answer.statusCode !== 0 && classify(answer.statusCode) !== '2xx';
        // Decided before the abort, which reports to the exchange at once: the race is the deadline's.
        resolve(failed ? answered(started, answer.statusCode, excerptOf(answer)) : timedOutAfter(started));
        answer.aborted = true;
        answer.controller?.abort(new ExchangeCut(`no answer within ${seconds}`));
      };
      timer = setTimeout(expire, timeoutMs);
    });
    try {
      const done = await Promise.race([exchange(target, body, headers, started, answer), deadline]);
      if (done.statusCode !== 0 && !answer.aborted) {
        // undici hands a kept-alive connection back to its pool one event-loop turn after the
        // response (setImmediate); a caller that sends again at once would otherwise find it busy
        // and open another connection, doubling the connections (and TLS handshakes) per origin.
        await new Promise<void>((resolve) => setImmediate(resolve));
      }
      return done;
    } finally {
      clearTimeout(timer);
      release();
    }
  }

  const sending = new Set<Promise<SendOutcome>>();
  let closing: Promise<void> | undefined;
  return {
    send(url, body, headers) {
      const sent = send(url, body, headers);
      sending.add(sent);
      const forget = (): void => void sending.delete(sent);
      sent.then(forget, forget);
      return sent;
    },
    close() {
      // Idempotent: both a service's shutdown and a test's teardown may call it.
      closing ??= (async () => {
        // Refuses new sends at once; those in flight end by their deadline.
        const closed = agent.close();
        await Promise.allSettled([...sending]);
        // Whatever undici still holds now was abandoned at a deadline, and nobody waits for it: it
        // is cut rather than awaited. (A handshake that never finished still holds its socket, and
        // `closed`, until the connect timeout; destroy() does not reach a connection in the making.)
        await agent.destroy();
        closed.catch(() => undefined);
        resolver.close();
      })();
      return closing;
    },
  };
}
