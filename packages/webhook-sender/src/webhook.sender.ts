import { readFileSync } from 'node:fs';
import { createSecureContext, rootCertificates, type SecureContext } from 'node:tls';
import { STATUS_CODES } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { AttemptErrorClass } from '@svc/contracts';
import { Agent, buildConnector, type Dispatcher } from 'undici';
import { parseCidrs, parseIp, type AllowList } from './address.guard';
import { normaliseHostName, parseHostMap } from './host-map.parser';
import { createNameResolver, DEFAULT_DNS_TIMEOUT_MS, type NameResolver } from './dns.resolver';
import { createGuardedLookup, refusal } from './guarded-lookup';
import { classify, clip, failureOf, isUndiciTimeout, type AttemptResult } from './send-failure.classifier';

/** How much of an answer is kept. */
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
  /** The deadline's timer, cleared once the attempt has its outcome. */
  timer: NodeJS.Timeout | undefined;
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

/** What every attempt of one sender shares: its agent, its deadline, and the deadlines waiting per host. */
interface SenderCore {
  agent: Agent;
  timeoutMs: number;
  /** A timeout's reason, the deadline in it (`no answer within 5 s`). */
  timeoutMessage: string;
  hosts: HostDeadlines;
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
  const hosts = createHostDeadlines(dnsTimeoutMs);
  const agent = createGuardedAgent({ hostMap, allow, timeoutMs, connectionsPerOrigin: options.connectionsPerOrigin, extraCaFile: options.extraCaFile }, resolver, hosts);
  return trackSends({ agent, timeoutMs, timeoutMessage: `no answer within ${timeoutMs / 1000} s`, hosts }, resolver);
}

/**
 * The deadlines of the attempts in flight, per host name. A connection is opened for its origin,
 * not for one attempt, so its lookup may take as long as the last attempt waiting for that host
 * has left, and no longer.
 */
interface HostDeadlines {
  /** Counts an attempt's deadline for its host; the function returned forgets it. */
  awaitHost(hostname: string, deadline: number): () => void;
  /** How long a lookup of this host may take now. */
  lookupBudget(hostname: string): number;
}

function createHostDeadlines(dnsTimeoutMs: number): HostDeadlines {
  const deadlines = new Map<string, number[]>();
  return {
    awaitHost(hostname, deadline) {
      const name = normaliseHostName(hostname);
      const list = deadlines.get(name) ?? [];
      list.push(deadline);
      deadlines.set(name, list);
      return () => {
        list.splice(list.indexOf(deadline), 1);
        if (list.length === 0) deadlines.delete(name);
      };
    },
    lookupBudget(hostname) {
      const list = deadlines.get(normaliseHostName(hostname));
      if (list === undefined) return dnsTimeoutMs;
      // A little past the latest deadline: when the deadline is what cuts the lookup short, the
      // attempt's own timer must fire first and call it a TIMEOUT (with the two at the same instant,
      // the lookup's timer sometimes won and the attempt was called a DNS failure).
      return list.reduce((latest, d) => Math.max(latest, d), -Infinity) - performance.now() + LOOKUP_GRACE_MS;
    },
  };
}

/** The agent whose every connection goes to a vetted address: looked up and checked in the connector, or an IP literal checked here. */
function createGuardedAgent(
  options: Pick<SenderOptions, 'connectionsPerOrigin' | 'extraCaFile'> & { hostMap: ReadonlyMap<string, string>; allow: AllowList; timeoutMs: number },
  resolver: NameResolver,
  hosts: HostDeadlines,
): Agent {
  const { hostMap, allow, timeoutMs } = options;
  const connectVetted = buildConnector({
    // Closes a connection that no attempt can use any more (they all ended at their deadline).
    timeout: timeoutMs,
    lookup: createGuardedLookup(hostMap, allow, (hostname) => resolver.resolve(hostname, hosts.lookupBudget(hostname))),
    ...(options.extraCaFile ? { secureContext: trustingAlso(options.extraCaFile) } : {}),
  });
  return new Agent({
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
}

/** The sender's face: each send counted while in flight, so that close() can wait for them. */
function trackSends(core: SenderCore, resolver: NameResolver): WebhookSender {
  const sending = new Set<Promise<SendOutcome>>();
  let closing: Promise<void> | undefined;
  return {
    send(url, body, headers) {
      const sent = sendOnce(core, url, body, headers);
      sending.add(sent);
      const forget = (): void => void sending.delete(sent);
      sent.then(forget, forget);
      return sent;
    },
    close() {
      // Idempotent: both a service's shutdown and a test's teardown may call it.
      closing ??= (async () => {
        // Refuses new sends at once; those in flight end by their deadline.
        const closed = core.agent.close();
        await Promise.allSettled([...sending]);
        // Whatever undici still holds now was abandoned at a deadline, and nobody waits for it: it
        // is cut rather than awaited. (A handshake that never finished still holds its socket, and
        // `closed`, until the connect timeout; destroy() does not reach a connection in the making.)
        await core.agent.destroy();
        closed.catch(() => undefined);
        resolver.close();
      })();
      return closing;
    },
  };
}

type OutcomeDetail = { statusCode?: number; error?: AttemptErrorClass | null; message?: string | null; response?: string | null };

function outcomeOf(started: number, result: AttemptResult, detail: OutcomeDetail = {}): SendOutcome {
  return {
    ok: result === '2xx',
    statusCode: detail.statusCode ?? 0,
    durationMs: Math.round(performance.now() - started),
    result,
    error: detail.error ?? null,
    message: detail.message ?? null,
    response: detail.response ?? null,
  };
}

const timedOutAfter = (core: SenderCore, started: number): SendOutcome => outcomeOf(started, 'timeout', { error: 'TIMEOUT', message: core.timeoutMessage });

function answered(started: number, statusCode: number, response: string): SendOutcome {
  const result = classify(statusCode);
  return outcomeOf(started, result, {
    statusCode,
    error: result === '2xx' ? null : 'HTTP_STATUS',
    message: result === '2xx' ? null : clip(`the receiver answered ${statusCode} ${STATUS_CODES[statusCode] ?? ''}`),
    response,
  });
}

/** The URL to send to, or why it is refused before any connection. */
function targetOf(url: string): URL | string {
  let target: URL;
  try {
    target = new URL(url);
  } catch {
    return 'the url is not a valid URL';
  }
  if (target.protocol !== 'https:' || target.username !== '' || target.password !== '') return 'the url is not an https:// URL without user information';
  return target;
}

/** One attempt: the exchange raced against its deadline; never rejects. */
async function sendOnce(core: SenderCore, url: string, body: string, headers: Record<string, string>): Promise<SendOutcome> {
  const started = performance.now();
  const target = targetOf(url);
  if (typeof target === 'string') return outcomeOf(started, 'blocked', { error: 'BLOCKED_ADDRESS', message: target });

  const answer: Exchange = { statusCode: 0, kept: [], keptBytes: 0, aborted: false, controller: null, timer: undefined };
  const release = core.hosts.awaitHost(target.hostname, started + core.timeoutMs);
  const expired = deadline(core, started, answer);
  try {
    const done = await Promise.race([exchange(core, target, body, headers, started, answer), expired]);
    if (done.statusCode !== 0 && !answer.aborted) {
      // undici hands a kept-alive connection back to its pool one event-loop turn after the
      // response (setImmediate); a caller that sends again at once would otherwise find it busy
      // and open another connection, doubling the connections (and TLS handshakes) per origin.
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    return done;
  } finally {
    clearTimeout(answer.timer);
    release();
  }
}

/** The attempt's outcome when its deadline passes first; it aborts the exchange as it decides. */
function deadline(core: SenderCore, started: number, answer: Exchange): Promise<SendOutcome> {
  return new Promise<SendOutcome>((resolve) => {
    const expire = (): void => {
      // Timers count from the event loop's cached clock, which can lag the real one by the
      // loop's current turn: such a timer fires a little early, and waits out the rest here.
      const left = started + core.timeoutMs - performance.now();
      if (left > 0) {
        answer.timer = setTimeout(expire, left);
        return;
      }
      // A failure's status already decided the outcome; only the rest of its body is cut short.
      const failed = answer.statusCode !== 0 && classify(answer.statusCode) !== '2xx';
      // Decided before the abort, which reports to the exchange at once: the race is the deadline's.
      resolve(failed ? answered(started, answer.statusCode, excerptOf(answer)) : timedOutAfter(core, started));
      answer.aborted = true;
      answer.controller?.abort(new ExchangeCut(core.timeoutMessage));
    };
    answer.timer = setTimeout(expire, core.timeoutMs);
  });
}

/**
 * The request and its answer, up to the end of the body; never rejects. The body is kept up to
 * KEPT_BYTES and drained (so the connection can carry the next delivery) up to MAX_DRAINED_BODY,
 * past which the answer counts as ended and its connection is closed.
 *
 * Through undici's dispatch handler rather than `request()`: no response stream, async iterator,
 * AbortSignal or async resource per attempt, none of which an attempt needs and each of which
 * cost CPU on every POST.
 */
function exchange(core: SenderCore, target: URL, body: string, headers: Record<string, string>, started: number, answer: Exchange): Promise<SendOutcome> {
  return new Promise((resolve) => {
    let seen = 0;
    const brokeOff = (err: unknown): void => {
      if (answer.aborted || isUndiciTimeout(err)) return resolve(timedOutAfter(core, started));
      // A failure's status stands, whatever became of its body; a 2xx counts only once its whole answer came.
      if (answer.statusCode !== 0) {
        if (classify(answer.statusCode) !== '2xx') return resolve(answered(started, answer.statusCode, excerptOf(answer)));
        return resolve(outcomeOf(started, 'network', failureOf(new Error('the answer broke off'), target.hostname)));
      }
      const failure = failureOf(err, target.hostname);
      resolve(outcomeOf(started, failure.error === 'BLOCKED_ADDRESS' ? 'blocked' : 'network', failure));
    };
    const handler: Dispatcher.DispatchHandler = {
      onRequestStart(controller) {
        answer.controller = controller;
        if (answer.aborted) controller.abort(new ExchangeCut(core.timeoutMessage));
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
      core.agent.dispatch({ origin: target.origin, path: target.pathname + target.search, method: 'POST', headers, body }, handler);
    } catch (err) {
      brokeOff(err);
    }
  });
}
