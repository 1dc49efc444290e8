import { readFileSync } from 'node:fs';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { eventBodyProblems } from '@svc/contracts';

/**
 * A real HTTPS webhook receiver on 127.0.0.1 for delivery tests, serving the throwaway certificate
 * of `node scripts/test-certs.mjs` (.test-certs/receiver.pem, valid for receiver.test, other.test and
 * private.test). The sender trusts it when jest runs with NODE_EXTRA_CA_CERTS=.test-certs/ca.pem
 * (the root `pnpm test` does so) and reaches it through DISPATCH_HOST_MAP:
 *
 *   const receiver = await startReceiver();
 *   const sender = createWebhookSender({ hostMap: 'receiver.test=127.0.0.1', allowCidrs: '127.0.0.0/8' });
 *   await sender.send(receiver.url('/hook'), body, headers);          // https://receiver.test:<port>/hook
 *   const [req] = await receiver.waitFor(1);                          // { path, headers, rawBody, receivedAt }
 *   receiver.respond('/slow', { status: 200, delayMs: 6000 });        // per-path behaviour
 *   receiver.respond('/moved', { status: 302, location: '/elsewhere' });
 *   receiver.respond('/dead', { hang: true });                        // never answers
 *   receiver.respond('/stall', { status: 200, stallBody: true });     // headers, then a body that never ends
 *   receiver.respond('/flaky', [{ status: 500 }, { status: 500 }, { status: 200 }]); // in turn, last repeats
 *   receiver.tlsSessions                                              // TLS handshakes completed so far
 *   await receiver.close();
 *
 * Every delivery it receives (a request with `X-SVC-Event` and `webhook-id`, as the platform builds
 * one) is checked against the event catalog (packages/contracts/src/event-catalog.ts): a body its
 * event's schema refuses, or whose event is not `X-SVC-Event`, makes `close()` throw, so every suite
 * that receives deliveries keeps the catalog exact about what is sent. A test that sends payloads
 * of its own making (the sender's unit tests) passes `checkEvents: false`.
 */

export const TEST_CERT_DIR = join(__dirname, '../../.test-certs');

export interface ReceivedRequest {
  method: string;
  /** Path and query as requested. */
  path: string;
  headers: IncomingHttpHeaders;
  /** The exact bytes received, before any parsing: what a signature is verified over. */
  rawBody: Buffer;
  /** Date.now() when the whole body had arrived. */
  receivedAt: number;
  /** Whether this request came over a resumed TLS session or a reused connection. */
  tlsSessionReused: boolean;
  /** 1-based number of the TCP connection it came on (same number = same kept-alive connection). */
  connection: number;
  /** The client's port of that connection: which process sent it (see process-sockets.ts). */
  remotePort: number;
}

export interface ResponsePlan {
  /** Default 200. */
  status?: number;
  /** Waits this long after the body arrived before answering. */
  delayMs?: number;
  /** Sets `Location` (use with a 3xx). */
  location?: string;
  headers?: Record<string, string>;
  /** Default `ok`. */
  body?: string;
  /** Never answers (the socket stays open until the client gives up or the receiver closes). */
  hang?: boolean;
  /** Destroys the connection without any response. */
  reset?: boolean;
  /** Sends the status line, headers and a first chunk of the body, then never finishes it. */
  stallBody?: boolean;
  /** Sends the status line, headers and a first chunk of the body, then destroys the connection. */
  breakBody?: boolean;
}

/** A fixed plan, a sequence used in turn (the last one repeats), or a function of the request. */
export type Responder = ResponsePlan | ResponsePlan[] | ((request: ReceivedRequest, index: number) => ResponsePlan);

export interface ReceiverOptions {
  /** What paths without their own responder get. Default `{ status: 200 }`. */
  defaultResponse?: Responder;
  /** Server keep-alive timeout (Node's default is 5 s). */
  keepAliveTimeoutMs?: number;
  /** Check every delivery's body against the event catalog (default true); see above. */
  checkEvents?: boolean;
}

export interface Receiver {
  port: number;
  /** `https://<host>:<port>`; host defaults to receiver.test. */
  origin(host?: string): string;
  /** `https://<host>:<port><path>`; host defaults to receiver.test. */
  url(path?: string, host?: string): string;
  /** Every request in arrival order (all paths). */
  readonly requests: readonly ReceivedRequest[];
  /** Requests to one path (query included in `path` matching only when given). */
  requestsTo(path: string): ReceivedRequest[];
  /** Programs the answer for one path (path without query). Replaces any previous responder. */
  respond(path: string, responder: Responder): void;
  /** TLS handshakes completed (each new connection, resumed sessions included). */
  readonly tlsSessions: number;
  /** Of those, how many resumed a cached session (abbreviated handshake). */
  readonly tlsResumed: number;
  /** TCP connections accepted, TLS or not. */
  readonly connections: number;
  /** The requests received and not yet answered, whose connection is still open. */
  inHand(): ReceivedRequest[];
  /** Resolves with the requests once at least `count` have arrived (optionally to `path`); rejects after `timeoutMs`. */
  waitFor(count: number, timeoutMs?: number, path?: string): Promise<ReceivedRequest[]>;
  /** Forgets recorded requests and counters (responders stay). */
  reset(): void;
  /** The deliveries received so far that the event catalog refuses, one line each. */
  readonly catalogProblems: readonly string[];
  /** Destroys every connection (hung requests included) and stops listening; throws if `catalogProblems` is not empty. */
  close(): Promise<void>;
}

/** An operator's notice (`OPERATOR_NOTIFY_URL`) has `empresaId` where a webhook's delivery has `webhookId`. */
const OPERATOR_NOTICE_KEYS = ['data', 'empresaId', 'event', 'timestamp'];
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** What the event catalog says is wrong with a received request, if it is a delivery; [] otherwise. */
export function deliveryProblems(request: Pick<ReceivedRequest, 'path' | 'headers' | 'rawBody'>): string[] {
  const event = request.headers['x-svc-event'];
  if (event === undefined || request.headers['webhook-id'] === undefined) return [];
  let body: unknown;
  try {
    body = JSON.parse(request.rawBody.toString('utf8'));
  } catch {
    return [`${request.path}: a delivery of ${String(event)} whose body is not JSON`];
  }
  const fields = typeof body === 'object' && body !== null ? (body as Record<string, unknown>) : {};
  const problems: string[] = [];
  if (fields.event !== event) problems.push(`X-SVC-Event ${String(event)} but the body's event is ${JSON.stringify(fields.event)}`);
  if (Object.keys(fields).sort().join() === OPERATOR_NOTICE_KEYS.join()) {
    if (typeof fields.empresaId !== 'string' || !UUID.test(fields.empresaId)) problems.push('an operator notice whose empresaId is not a UUID');
    const { empresaId, ...rest } = fields;
    problems.push(...eventBodyProblems({ ...rest, webhookId: empresaId }));
  } else {
    problems.push(...eventBodyProblems(body));
  }
  return problems.map((p) => `${request.path}: ${p} in ${request.rawBody.toString('utf8').slice(0, 500)}`);
}

const pathOnly = (path: string): string => path.split('?', 1)[0] ?? path;

export async function startReceiver(options: ReceiverOptions = {}): Promise<Receiver> {
  const server: Server = createServer({
    cert: readFileSync(join(TEST_CERT_DIR, 'receiver.pem')),
    key: readFileSync(join(TEST_CERT_DIR, 'receiver.key')),
  });
  if (options.keepAliveTimeoutMs !== undefined) server.keepAliveTimeout = options.keepAliveTimeoutMs;

  let requests: ReceivedRequest[] = [];
  const responders = new Map<string, Responder>();
  const counts = new Map<string, number>();
  const waiters = new Set<() => void>();
  const sockets = new Set<Socket>();
  const connectionIds = new WeakMap<Socket, number>();
  const timers = new Set<NodeJS.Timeout>();
  let tlsSessions = 0;
  let tlsResumed = 0;
  let connections = 0;
  const inHand = new Set<ReceivedRequest>();
  const catalogProblems: string[] = [];

  server.on('connection', (socket: Socket) => {
    connections += 1;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  server.on('secureConnection', (socket: TLSSocket) => {
    tlsSessions += 1;
    if (socket.isSessionReused()) tlsResumed += 1;
    connectionIds.set(socket, tlsSessions);
  });
  // A client that gives up mid-handshake is normal in these tests (timeouts, name mismatch).
  server.on('tlsClientError', () => undefined);

  const planFor = (request: ReceivedRequest): ResponsePlan => {
    const key = pathOnly(request.path);
    const responder = responders.get(key) ?? options.defaultResponse ?? {};
    const index = counts.get(key) ?? 0;
    counts.set(key, index + 1);
    if (typeof responder === 'function') return responder(request, index);
    if (Array.isArray(responder)) return responder[Math.min(index, responder.length - 1)] ?? {};
    return responder;
  };

  const answer = (res: ServerResponse, plan: ResponsePlan): void => {
    if (plan.reset === true) {
      res.socket?.destroy();
      return;
    }
    if (plan.hang === true) return;
    const headers: Record<string, string> = { 'content-type': 'text/plain', ...plan.headers };
    if (plan.location !== undefined) headers.location = plan.location;
    res.writeHead(plan.status ?? 200, headers);
    if (plan.stallBody === true || plan.breakBody === true) {
      res.write(plan.body ?? 'partial');
      // After the chunk has left, so that the client reads it before the connection ends.
      if (plan.breakBody === true) setTimeout(() => res.socket?.destroy(), 50);
      return;
    }
    res.end(plan.body ?? 'ok');
  };

  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const socket = req.socket as TLSSocket;
      const request: ReceivedRequest = {
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        rawBody: Buffer.concat(chunks),
        receivedAt: Date.now(),
        tlsSessionReused: socket.isSessionReused(),
        connection: connectionIds.get(socket) ?? 0,
        remotePort: socket.remotePort ?? 0,
      };
      requests.push(request);
      if (options.checkEvents !== false) catalogProblems.push(...deliveryProblems(request));
      inHand.add(request);
      res.once('close', () => inHand.delete(request));
      const plan = planFor(request);
      for (const wake of [...waiters]) wake();
      if (plan.delayMs !== undefined && plan.delayMs > 0) {
        const timer = setTimeout(() => {
          timers.delete(timer);
          if (!res.destroyed) answer(res, plan);
        }, plan.delayMs);
        timers.add(timer);
      } else {
        answer(res, plan);
      }
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;

  const matching = (path?: string): ReceivedRequest[] =>
    path === undefined ? [...requests] : requests.filter((r) => r.path === path || pathOnly(r.path) === path);

  return {
    port,
    origin: (host = 'receiver.test') => `https://${host}:${port}`,
    url: (path = '/hook', host = 'receiver.test') => `https://${host}:${port}${path}`,
    get requests() {
      return requests;
    },
    requestsTo: (path) => matching(path),
    respond(path, responder) {
      responders.set(pathOnly(path), responder);
      counts.delete(pathOnly(path));
    },
    get tlsSessions() {
      return tlsSessions;
    },
    get tlsResumed() {
      return tlsResumed;
    },
    get connections() {
      return connections;
    },
    inHand: () => [...inHand],
    get catalogProblems() {
      return catalogProblems;
    },
    waitFor(count, timeoutMs = 5000, path) {
      return new Promise((resolve, reject) => {
        const check = (): boolean => {
          const found = matching(path);
          if (found.length < count) return false;
          clearTimeout(timer);
          waiters.delete(wake);
          resolve(found);
          return true;
        };
        const wake = (): void => void check();
        const timer = setTimeout(() => {
          waiters.delete(wake);
          reject(new Error(`receiver: ${matching(path).length} of ${count} requests${path ? ` to ${path}` : ''} within ${timeoutMs} ms`));
        }, timeoutMs);
        waiters.add(wake);
        check();
      });
    },
    reset() {
      requests = [];
      counts.clear();
      tlsSessions = 0;
      tlsResumed = 0;
      connections = 0;
    },
    async close() {
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      server.closeAllConnections();
      await closed;
      if (catalogProblems.length > 0) {
        throw new Error(`receiver: ${catalogProblems.length} deliveries do not match the event catalog (packages/contracts/src/event-catalog.ts):\n${catalogProblems.join('\n')}`);
      }
    },
  };
}
