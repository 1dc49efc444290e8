import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { readFileSync } from 'node:fs';
import { isIP, type LookupFunction } from 'node:net';
import { createSecureContext, rootCertificates, type SecureContext } from 'node:tls';
import { STATUS_CODES } from 'node:http';
import { performance } from 'node:perf_hooks';
import { Agent, buildConnector } from 'undici';
import { guardedRange, isAllowed, parseCidrs, parseIp, type AllowList } from './address.guard';
import { normaliseHostName, parseHostMap } from './host-map.parser';

export type AttemptResult = '2xx' | '3xx' | '4xx' | '5xx' | 'timeout' | 'network' | 'blocked';

/** Why an attempt failed: the classes a receiver's owner can act on. */
export type AttemptError = 'TIMEOUT' | 'DNS' | 'CONNECTION' | 'TLS' | 'BLOCKED_ADDRESS' | 'HTTP_STATUS';

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
  error: AttemptError | null;
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
  /** The whole attempt (resolve, connect, TLS, headers, body). Default 5000, the contract's. */
  timeoutMs?: number;
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
/** Response bodies are drained (so the connection can carry the next delivery) up to this size. */
const MAX_DRAINED_BODY = 64 * 1024;
const BLOCKED_CODE = 'SVC_ADDRESS_BLOCKED';

/** Raised inside the connector when the address guard refuses the resolved address. */
export class BlockedAddressError extends Error {
  readonly code = BLOCKED_CODE;
  constructor(host: string, address: string, range: string) {
    super(`${host} resolves to ${address} (${range} range), where the sender does not connect`);
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
function failureOf(err: unknown, host: string): { error: AttemptError; message: string } {
  const e = codedError(err);
  const code = typeof e?.code === 'string' ? e.code : '';
  const text = e?.message ?? String(err);
  if (code === BLOCKED_CODE) return { error: 'BLOCKED_ADDRESS', message: clip(text) };
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
 * Reads the answer's body: its first MAX_RESPONSE_LENGTH characters as text, and the rest drained
 * (so the connection can carry the next delivery) up to MAX_DRAINED_BODY, past which the body is
 * dropped and its connection closed. A body that breaks off (the deadline, a reset) gives what came.
 */
async function excerpt(body: AsyncIterable<Buffer> & { destroy(): unknown }): Promise<{ text: string; complete: boolean }> {
  const kept: Buffer[] = [];
  let keptBytes = 0;
  let seen = 0;
  // A UTF-8 character is at most 4 bytes: this many bytes hold MAX_RESPONSE_LENGTH characters.
  const keep = MAX_RESPONSE_LENGTH * 4;
  let complete = true;
  try {
    for await (const chunk of body) {
      seen += chunk.length;
      if (keptBytes < keep) {
        kept.push(chunk);
        keptBytes += chunk.length;
      }
      if (seen > MAX_DRAINED_BODY) {
        body.destroy();
        break;
      }
    }
  } catch {
    complete = false;
  }
  const decoded = new TextDecoder().decode(Buffer.concat(kept).subarray(0, keep));
  // Code points, not UTF-16 units, so a character is never cut in half; a text of at most that
  // many units (the usual short answer) has at most that many code points and is kept as it is.
  const text = decoded.length <= MAX_RESPONSE_LENGTH ? decoded : [...decoded].slice(0, MAX_RESPONSE_LENGTH).join('');
  return { text, complete };
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

/**
 * The connector's `lookup`: DISPATCH_HOST_MAP first, then DNS with every address, each vetted. Node
 * connects to exactly what this returns, so the address checked is the address used (no second
 * lookup that a rebinding DNS server could answer differently). A name with any guarded address is
 * refused as a whole rather than filtered, since a mixed answer is itself suspicious.
 */
export function createGuardedLookup(hostMap: ReadonlyMap<string, string>, allow: AllowList): LookupFunction {
  return (hostname, options: LookupOptions, callback) => {
    const answer = (addresses: LookupAddress[]): void => {
      const blocked = refusal(hostname, addresses.map((a) => a.address), allow);
      if (blocked !== null) {
        callback(blocked, '', 0);
        return;
      }
      if (options.all === true) callback(null, addresses);
      else callback(null, addresses[0]!.address, addresses[0]!.family);
    };
    const mapped = hostMap.get(normaliseHostName(hostname));
    if (mapped !== undefined) {
      // net expects the lookup to answer asynchronously, as DNS would.
      process.nextTick(answer, [{ address: mapped, family: isIP(mapped) }]);
      return;
    }
    dnsLookup(hostname, { all: true, family: options.family ?? 0, hints: options.hints }, (err, addresses) => {
      if (err) callback(err, '', 0);
      else answer(addresses);
    });
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
 */
export function createWebhookSender(options: SenderOptions): WebhookSender {
  const hostMap = parseHostMap(options.hostMap);
  const allow = parseCidrs(options.allowCidrs);
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) throw new Error('timeoutMs must be a positive number');

  const connectVetted = buildConnector({
    timeout: timeoutMs,
    lookup: createGuardedLookup(hostMap, allow),
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
    detail: { statusCode?: number; error?: AttemptError | null; message?: string | null; response?: string | null } = {},
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

    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, timeoutMs);
    try {
      const response = await agent.request({
        origin: target.origin,
        path: target.pathname + target.search,
        method: 'POST',
        headers,
        body,
        signal: controller.signal,
      });
      const result = classify(response.statusCode);
      const answer = await excerpt(response.body);
      // A 2xx counts only once its whole answer came within the deadline; a failure's status stands.
      if (result === '2xx' && !answer.complete) return timedOut ? timedOutAfter(started) : outcome(started, 'network', failureOf(new Error('the answer broke off'), target.hostname));
      const done = outcome(started, result, {
        statusCode: response.statusCode,
        error: result === '2xx' ? null : 'HTTP_STATUS',
        message: result === '2xx' ? null : clip(`the receiver answered ${response.statusCode} ${STATUS_CODES[response.statusCode] ?? ''}`),
        response: answer.text,
      });
      // undici hands a kept-alive connection back to its pool one event-loop turn after the
      // response (setImmediate); a caller that sends again at once would otherwise find it busy
      // and open another connection, doubling the connections (and TLS handshakes) per origin.
      await new Promise<void>((resolve) => setImmediate(resolve));
      return done;
    } catch (err) {
      if (timedOut || TIMEOUT_CODES.some((code) => hasCode(err, code))) return timedOutAfter(started);
      const failure = failureOf(err, target.hostname);
      return outcome(started, failure.error === 'BLOCKED_ADDRESS' ? 'blocked' : 'network', failure);
    } finally {
      clearTimeout(timer);
    }
  }

  let closing: Promise<void> | undefined;
  return {
    send,
    close() {
      // Idempotent: both a service's shutdown and a test's teardown may call it.
      closing ??= agent.close();
      return closing;
    },
  };
}
