// `pnpm bench:listen` (bench/README.md, "Listen transport"): what one forwarded attempt of `svc listen`
// costs over the transport the project ships, Server-Sent Events with a POST per answer, against a
// WebSocket answered on the same socket, measured in one run on 127.0.0.1. This process is the
// server of both (express, and ws on the same http server); the client is a child process
// (transport-client.ts), so each side's CPU is its own. Paced rates, both transports in alternation
// at each (A B A B ...), every figure reported beside its WS/SSE ratio (decision 0013).
import { spawn, type ChildProcess } from 'node:child_process';
import { hash, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { createServer } from 'node:http';
import type { Socket } from 'node:net';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import express, { type RequestHandler, type Response } from 'express';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import { LISTEN_ANSWER_TIMEOUT_MS, LISTEN_RELAY_MARGIN_MS, listenAttemptId, MAX_BATCH, validateListenAnswer, type ListenForward } from '@svc/contracts';
import { deliveryBody, deliveryHeaders } from '@svc/webhook-sender';
import { forwardEvent, openedEvent, startEventStream } from '../../services/gateway/src/listen/listen-streams';
import { cpuPercent, cpuSnapshot } from '../support/cpu';
import { LABEL, paths, textOf, TRANSPORTS, type SocketMessage, type ToBench, type ToClient, type Transport } from './protocol';

const ROOT = join(__dirname, '..', '..');

// ---- knobs ---------------------------------------------------------------------------------------

const num = (name: string, fallback: number): number => (process.env[name] === undefined || process.env[name] === '' ? fallback : Number(process.env[name]));
/** BENCH_SCALE (1) multiplies the default of every duration below (not one set explicitly). */
const SCALE = num('BENCH_SCALE', 1);
const scaled = (name: string, fallback: number, least: number): number => num(name, Math.max(least, fallback * SCALE));
/** Attempts per second, each a phase of both transports. */
const RATES = (process.env.BENCH_LISTEN_RATES ?? '10,100,1000')
  .split(',')
  .map(Number)
  .filter((r) => r > 0);
/** Seconds each phase is measured, after WARMUP_SECONDS at its rate that are not. */
const SECONDS = scaled('BENCH_LISTEN_SECONDS', 5, 1);
const WARMUP_SECONDS = scaled('BENCH_LISTEN_WARMUP', 1, 0.5);
/**
 * Seconds of each transport at the highest rate before anything is measured, so that V8 has
 * compiled both paths and the first (slowest) rate does not pay for it.
 */
const PRIME_SECONDS = scaled('BENCH_LISTEN_PRIME', 2, 0.5);
/** Rounds of A B at each rate: each transport's latencies are pooled over them, its CPU and bytes are their median. */
const ROUNDS = Math.max(1, Math.round(num('BENCH_LISTEN_ROUNDS', 3)));
/** The server's port (0: any free one, so two runs never collide). */
const PORT = num('BENCH_LISTEN_PORT', 0);
/** The delivery body's size: a GUIA_DEVOLUCION whose `motivo` (at most 500 characters) fills it; most events' bodies are about 200 bytes. */
const BODY_BYTES = num('BENCH_LISTEN_BODY_BYTES', 600);

// ---- constants -----------------------------------------------------------------------------------

/** How long an answer may take: the dispatcher gives up on an attempt after the deadline and its margin, so a later answer is lost. */
const DRAIN_MS = LISTEN_ANSWER_TIMEOUT_MS + LISTEN_RELAY_MARGIN_MS;
/** A phase kept its rate when it sent and was answered at this share of it at least, losing nothing (the dispatcher bench's rule). */
const KEPT_SHARE = 0.95;
/** The gateway's RATE_LIMIT_PER_MINUTE default (services/gateway/src/config.ts): requests a token may make in a minute's window. */
const RATE_LIMIT_PER_MINUTE = 100;
/**
 * `svc trigger GUIA_ENTREGADA`: one creation and four `simular` requests (packages/cli/src/trigger.command.ts),
 * whose five events each bring an answer: the sandbox's usual burst.
 */
const TRIGGER_REQUESTS = 5;
const TRIGGER_EVENTS = 5;
/** The gateway's (services/gateway/src/gateway.ts): the answers' keep-alive connections live as long as there. */
const KEEP_ALIVE_TIMEOUT_MS = 15_000;
/** The gateway's body limit (services/gateway/src/http/body.middleware.ts), on both transports. */
const MAX_BODY_BYTES = 1024 * 1024;
/** The longest `motivo` a GUIA_DEVOLUCION may carry (the event catalog's schema), so the body stays a valid one. */
const MAX_MOTIVO = 500;
/** Repeated and cut to fill the body to BODY_BYTES: plain ASCII, so characters and bytes agree. */
const MOTIVO = 'Destinatario ausente en tres visitas; el vecino indica que se mudo y no dejo nueva direccion. ';

// ---- the attempt -----------------------------------------------------------------------------------

/**
 * Every attempt but its id: the body and headers the dispatcher's relay builds
 * (services/dispatcher/src/listen/listen.relay.ts), signed once, since signing is the dispatcher's
 * work and the same whichever transport carries it.
 */
function attemptTemplate(): Omit<ListenForward, 'intento'> {
  const at = new Date();
  const input = {
    deliveryId: randomUUID(),
    eventId: randomUUID(),
    event: 'GUIA_DEVOLUCION',
    secret: `whsec_${randomBytes(32).toString('base64')}`,
    previousSecret: null,
    sequence: 4,
    mode: 'test' as const,
  };
  const bodyWith = (motivo: string): string => deliveryBody({ ...input, data: { numeroGuia: 'SVC7K2M9Q4XJD', estado: 'DEVOLUCION', motivo } }, at.toISOString());
  const room = Math.min(MAX_MOTIVO, Math.max(1, BODY_BYTES - Buffer.byteLength(bodyWith(''))));
  const body = bodyWith(MOTIVO.repeat(Math.ceil(room / MOTIVO.length)).slice(0, room).trim());
  return { evento: input.event, body, headers: deliveryHeaders(body, input, at) };
}

// ---- the server ----------------------------------------------------------------------------------

const token = `svc_test_${randomBytes(32).toString('base64url')}`;
const sessionId = randomUUID();
/** The dispatcher instance the attempts' ids name (listenAttemptId), as the relay's do. */
const instance = randomUUID();
const tokens = new Map<string, { hash: Buffer; sessionId: string }>([[hash('sha256', token, 'hex'), { hash: hash('sha256', token, 'buffer'), sessionId }]]);

/**
 * The stand-in for the gateway's token check: the token's SHA-256 looked up in a Map, then compared
 * in constant time, and the session it names checked against the token's. The gateway also runs a
 * Redis rate-limit script and reads the session from Postgres for every answer; the bench leaves both out.
 */
function authorized(header: string | undefined, id: string): boolean {
  if (header === undefined || !header.startsWith('Bearer ')) return false;
  const digest = hash('sha256', header.slice('Bearer '.length), 'buffer');
  const known = tokens.get(digest.toString('hex'));
  return known !== undefined && timingSafeEqual(digest, known.hash) && known.sessionId === id;
}

/** The attempts waiting for their answer, and when each was sent (performance.now()): the latency is send → the server has the answer. */
const pending = new Map<string, number>();
let current = { latencies: [] as number[], lastAnswerAt: 0 };
let whenEmpty: (() => void) | undefined;
/** Answers that came for no attempt waiting (after their phase gave them up). */
let stray = 0;

function received(intento: string): void {
  const sentAt = pending.get(intento);
  if (sentAt === undefined) {
    stray++;
    return;
  }
  pending.delete(intento);
  const now = performance.now();
  current.latencies.push(now - sentAt);
  current.lastAnswerAt = now;
  if (pending.size === 0) whenEmpty?.();
}

/** How each transport hands an attempt to the client, set once it has connected. */
const senders: Partial<Record<Transport, (f: ListenForward) => void>> = {};
let stream: Response | undefined;
let socket: WebSocket | undefined;

/** services/gateway/src/http/send-json.ts's fast path: the envelope with its length, no express work. */
function sendData(res: Response, status: number, data: unknown): void {
  const text = JSON.stringify({ success: true, data });
  res.statusCode = status;
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Content-Length', Buffer.byteLength(text));
  res.end(text);
}

/** What the gateway's middlewares put on every API answer (request id, no-store, the rate limit's three), then the token check. */
const guard: RequestHandler = (req, res, next) => {
  res.setHeader('X-Request-Id', randomUUID());
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('X-RateLimit-Limit', String(RATE_LIMIT_PER_MINUTE));
  if (!authorized(req.headers.authorization, String(req.params.id))) {
    res.statusCode = 401;
    res.end();
    return;
  }
  res.setHeader('X-RateLimit-Remaining', String(RATE_LIMIT_PER_MINUTE - 1));
  res.setHeader('X-RateLimit-Reset', String(Math.ceil(Date.now() / 1000) + 60));
  next();
};

const app = express();
app.disable('x-powered-by');
app.set('etag', false);
const jsonBody = express.json({ limit: MAX_BODY_BYTES, strict: false, type: () => true });

// The stream as the gateway writes it (listen-streams.ts's own functions): its headers, no Nagle, the retry hint and `abierta`, then one `entrega` per attempt.
app.get(paths.stream(':id'), guard, (req, res) => {
  startEventStream(req, res);
  stream = res;
  const write = (chunk: string): void => {
    if (!res.writableEnded) res.write(chunk);
  };
  senders.sse = (f) => write(forwardEvent(f));
  write(openedEvent(String(req.params.id)));
  res.on('close', () => {
    delete senders.sse;
    stream = undefined;
  });
});

// The answer as listen.routes.ts takes it: guarded, the JSON body parsed and validated, the envelope back.
app.post(paths.answers(':id'), guard, jsonBody, (req, res) => {
  const answer = validateListenAnswer(req.body);
  received(answer.intento);
  sendData(res, 200, { intento: answer.intento });
});

const server = createServer({ keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS }, app);

/** Bytes the server's sockets read and wrote: everything above TCP (HTTP, SSE and WebSocket framing included). */
const sockets = new Set<Socket>();
const closed = { read: 0, written: 0 };
/** TCP connections accepted so far: the SSE answers' POSTs open more when several are in flight at once. */
let accepted = 0;
server.on('connection', (s: Socket) => {
  accepted++;
  sockets.add(s);
  s.on('close', () => {
    sockets.delete(s);
    closed.read += s.bytesRead;
    closed.written += s.bytesWritten;
  });
});
function socketBytes(): { down: number; up: number } {
  let down = closed.written;
  let up = closed.read;
  for (const s of sockets) {
    down += s.bytesWritten;
    up += s.bytesRead;
  }
  return { down, up };
}


// The WebSocket: the token checked once, at the upgrade; each answer a frame on the same socket.
const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload: MAX_BODY_BYTES });
const SOCKET_PATH = new RegExp(`^${paths.socket('([0-9a-f-]{36})')}$`);
server.on('upgrade', (req, raw: Duplex, head: Buffer) => {
  const id = SOCKET_PATH.exec(req.url ?? '')?.[1];
  if (id === undefined || !authorized(req.headers.authorization, id)) {
    raw.end('HTTP/1.1 401 Unauthorized\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
    return;
  }
  wss.handleUpgrade(req, raw, head, (ws) => {
    socket = ws;
    ws.on('message', (data: RawData) => {
      const m = JSON.parse(textOf(data)) as SocketMessage;
      if (m.tipo === 'respuesta') received(validateListenAnswer(m.data).intento);
    });
    ws.on('close', () => {
      delete senders.ws;
      socket = undefined;
    });
    senders.ws = (f) => ws.send(JSON.stringify({ tipo: 'entrega', data: f } satisfies SocketMessage));
    ws.send(JSON.stringify({ tipo: 'abierta', data: { id } } satisfies SocketMessage));
  });
});

// ---- the client ----------------------------------------------------------------------------------

function startClient(): ChildProcess {
  return spawn(process.execPath, ['--import', 'tsx', join(__dirname, 'transport-client.ts')], { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
}

/** Sends `m` to the client and waits for its reply of `type` (a `failed` one, or the client's exit, rejects). */
function ask<T extends ToBench['type']>(child: ChildProcess, m: ToClient, type: T): Promise<Extract<ToBench, { type: T }>> {
  return new Promise((resolve, reject) => {
    const onMessage = (raw: unknown): void => {
      const reply = raw as ToBench;
      if (reply.type === 'failed') done(() => reject(new Error(`client: ${reply.message}`)));
      else if (reply.type === type) done(() => resolve(reply as Extract<ToBench, { type: T }>));
    };
    const onExit = (code: number | null): void => done(() => reject(new Error(`the client exited (${code})`)));
    const done = (settle: () => void): void => {
      child.off('message', onMessage);
      child.off('exit', onExit);
      settle();
    };
    child.on('message', onMessage);
    child.once('exit', onExit);
    child.send(m);
  });
}

// ---- a phase -------------------------------------------------------------------------------------

interface Measured {
  sent: number;
  /** Sends per second, and answers per second, over the phase. */
  sendRate: number;
  answerRate: number;
  latencies: number[];
  serverMicros: number;
  clientMicros: number;
  down: number;
  up: number;
  lost: number;
  refused: number;
  /** New TCP connections the client opened during the phase. */
  connections: number;
  /** % of one core other processes used meanwhile. */
  others: number;
}

/** Sends at `rate` for `seconds` on the schedule, whatever the answers do (several at once when a tick came late). */
async function pace(rate: number, seconds: number, send: () => void): Promise<{ sent: number; lastAt: number }> {
  const total = Math.max(1, Math.round(rate * seconds));
  const interval = 1000 / rate;
  const start = performance.now();
  let sent = 0;
  let lastAt = start;
  while (sent < total) {
    const now = performance.now();
    while (sent < total && start + sent * interval <= now) {
      send();
      sent++;
      lastAt = now;
    }
    if (sent < total) await sleep(Math.max(0, start + sent * interval - performance.now()));
  }
  return { sent, lastAt };
}

/** Waits until every attempt sent has its answer, DRAIN_MS at most; the attempts still waiting then are lost. */
async function drain(): Promise<number> {
  if (pending.size > 0) {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, DRAIN_MS);
      whenEmpty = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
  whenEmpty = undefined;
  const lost = pending.size;
  pending.clear();
  return lost;
}

async function phase(child: ChildProcess, template: Omit<ListenForward, 'intento'>, transport: Transport, rate: number, seconds: number): Promise<Measured> {
  const send = senders[transport];
  if (send === undefined) throw new Error(`${LABEL[transport]} is not connected`);
  const clientBefore = await ask(child, { cmd: 'usage' }, 'usage');
  const machineBefore = cpuSnapshot({ client: child.pid! });
  const bytesBefore = socketBytes();
  const acceptedBefore = accepted;
  current = { latencies: [], lastAnswerAt: 0 };
  const cpuBefore = process.cpuUsage();
  const start = performance.now();
  const { sent, lastAt } = await pace(rate, seconds, () => {
    const attempt = attemptOf(template);
    pending.set(attempt.intento, performance.now());
    send(attempt);
  });
  const lost = await drain();
  const cpu = process.cpuUsage(cpuBefore);
  const elapsed = (performance.now() - start) / 1000;
  const bytes = socketBytes();
  const machine = cpuPercent(machineBefore, cpuSnapshot({ client: child.pid! }), elapsed);
  const clientAfter = await ask(child, { cmd: 'usage' }, 'usage');
  const answered = current.latencies.length;
  const interval = 1 / rate;
  return {
    sent,
    sendRate: sent / ((lastAt - start) / 1000 + interval),
    answerRate: answered === 0 ? 0 : answered / ((current.lastAnswerAt - start) / 1000 + interval),
    latencies: current.latencies,
    serverMicros: (cpu.user + cpu.system) / Math.max(1, answered),
    clientMicros: (clientAfter.cpuMicros - clientBefore.cpuMicros) / Math.max(1, answered),
    down: (bytes.down - bytesBefore.down) / Math.max(1, answered),
    up: (bytes.up - bytesBefore.up) / Math.max(1, answered),
    lost,
    refused: clientAfter.refused - clientBefore.refused,
    connections: accepted - acceptedBefore,
    others: machine.others ?? 0,
  };
}

/** An attempt with a fresh id, as each send makes it: the work common to both transports. */
const attemptOf = (template: Omit<ListenForward, 'intento'>): ListenForward => ({ intento: listenAttemptId(instance, randomUUID()), ...template });

/**
 * The server's CPU per send of the pacing and the attempt's id alone, with no transport: part of
 * both transports' server figure, which it brings closer together than the transports alone are.
 */
async function pacingAlone(template: Omit<ListenForward, 'intento'>, rate: number, seconds: number): Promise<number> {
  const before = process.cpuUsage();
  const { sent } = await pace(rate, seconds, () => {
    attemptOf(template);
  });
  const cpu = process.cpuUsage(before);
  return (cpu.user + cpu.system) / sent;
}

const kept = (m: Measured, rate: number): boolean => m.lost === 0 && m.refused === 0 && m.sendRate >= KEPT_SHARE * rate && m.answerRate >= KEPT_SHARE * rate;

// ---- the report ------------------------------------------------------------------------------------

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};
const percentile = (sorted: number[], q: number): number => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? NaN;
const fmt = (x: number, digits = 0): string => (Number.isFinite(x) ? x.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits }) : '-');
const ratio = (ws: number, sse: number): string => (sse > 0 && Number.isFinite(ws / sse) ? (ws / sse).toFixed(2) : '-');

interface Summary {
  roundTrips: number;
  p50: number;
  p99: number;
  max: number;
  server: number;
  client: number;
  down: number;
  up: number;
  keptRounds: number;
  connections: number;
  sendRate: number;
  answerRate: number;
  lost: number;
  others: number;
}

function summarize(rounds: Measured[], rate: number): Summary {
  const all = rounds.flatMap((m) => m.latencies).sort((a, b) => a - b);
  return {
    roundTrips: all.length,
    p50: percentile(all, 0.5),
    p99: percentile(all, 0.99),
    max: all[all.length - 1] ?? NaN,
    server: median(rounds.map((m) => m.serverMicros)),
    client: median(rounds.map((m) => m.clientMicros)),
    down: median(rounds.map((m) => m.down)),
    up: median(rounds.map((m) => m.up)),
    keptRounds: rounds.filter((m) => kept(m, rate)).length,
    connections: rounds.reduce((n, m) => n + m.connections, 0),
    sendRate: median(rounds.map((m) => m.sendRate)),
    answerRate: median(rounds.map((m) => m.answerRate)),
    lost: rounds.reduce((n, m) => n + m.lost + m.refused, 0),
    others: median(rounds.map((m) => m.others)),
  };
}

function table(rate: number, s: Summary, w: Summary, pacing: number): void {
  const rows: Array<[string, string, string, string]> = [
    ['latency p50, ms', fmt(s.p50, 2), fmt(w.p50, 2), ratio(w.p50, s.p50)],
    ['latency p99, ms', fmt(s.p99, 2), fmt(w.p99, 2), ratio(w.p99, s.p99)],
    ['latency max, ms', fmt(s.max, 2), fmt(w.max, 2), ratio(w.max, s.max)],
    ['server CPU per round trip, µs', fmt(s.server), fmt(w.server), ratio(w.server, s.server)],
    ['  of which pacing and ids, µs', fmt(pacing), fmt(pacing), ''],
    ['client CPU per round trip, µs', fmt(s.client), fmt(w.client), ratio(w.client, s.client)],
    ['both, µs', fmt(s.server + s.client), fmt(w.server + w.client), ratio(w.server + w.client, s.server + s.client)],
    ['bytes per round trip, down', fmt(s.down), fmt(w.down), ratio(w.down, s.down)],
    ['bytes per round trip, up', fmt(s.up), fmt(w.up), ratio(w.up, s.up)],
    ['bytes per round trip, total', fmt(s.down + s.up), fmt(w.down + w.up), ratio(w.down + w.up, s.down + s.up)],
    ['rate kept (rounds)', `${s.keptRounds}/${ROUNDS}`, `${w.keptRounds}/${ROUNDS}`, ''],
    ['sent/s; answered/s (median)', `${fmt(s.sendRate, 1)}; ${fmt(s.answerRate, 1)}`, `${fmt(w.sendRate, 1)}; ${fmt(w.answerRate, 1)}`, ''],
    ['lost or refused answers', fmt(s.lost), fmt(w.lost), ''],
    ['connections opened (all rounds)', fmt(s.connections), fmt(w.connections), ''],
    ['others, % of a core (median)', fmt(s.others), fmt(w.others), ''],
  ];
  console.log(`\n${fmt(rate)}/s: ${ROUNDS} rounds of ${fmt(SECONDS, 1)} s, ${fmt(s.roundTrips)} / ${fmt(w.roundTrips)} round trips`);
  console.log(`  ${''.padEnd(32)}${LABEL.sse.padStart(16)}${LABEL.ws.padStart(16)}${'WS/SSE'.padStart(9)}`);
  for (const [name, a, b, r] of rows) console.log(`  ${name.padEnd(32)}${a.padStart(16)}${b.padStart(16)}${r.padStart(9)}`);
}

function rateLimitArithmetic(): void {
  const perSecond = RATE_LIMIT_PER_MINUTE / 60;
  console.log(`\nRate limit: the gateway's default window is ${RATE_LIMIT_PER_MINUTE} requests a minute per token.`);
  console.log(`  ${LABEL.sse}: one request of that window per answer on the counted route (POST .../respuestas); the gateway now leaves the answer`);
  console.log(`    owed to a waiting attempt out of it (POST .../respuestas/{intento}, decision 0013): what follows is the cost that removed.`);
  for (const rate of RATES) console.log(`    at ${fmt(rate)}/s: ${fmt(rate * 60)} requests a minute, ${fmt((rate * 60) / RATE_LIMIT_PER_MINUTE, 1)}x the window`);
  console.log(`    sustained, the window holds ${perSecond.toFixed(2)} answers/s, less the token's other requests (the stream's GET, the session's POST, svc trigger's calls);`);
  console.log(
    `    svc trigger GUIA_ENTREGADA makes ${TRIGGER_REQUESTS} requests and its ${TRIGGER_EVENTS} events ${TRIGGER_EVENTS} answers: ` +
      `${Math.floor(RATE_LIMIT_PER_MINUTE / (TRIGGER_REQUESTS + TRIGGER_EVENTS))} triggers a minute fill the window ` +
      `(${Math.floor(RATE_LIMIT_PER_MINUTE / TRIGGER_REQUESTS)} over WebSocket);`,
  );
  console.log(
    `    a sandbox batch of ${MAX_BATCH} shipments (POST /api/v1/guias/batch, the most) brings ${MAX_BATCH} answers within seconds: ` +
      `with the batch's own request, ${MAX_BATCH + 1 - RATE_LIMIT_PER_MINUTE} or more are refused 429 (more if the token made other calls that minute);`,
  );
  console.log(`    an answer refused 429 is lost: its attempt times out after ${DRAIN_MS / 1000} s and its retries bring more answers to the same window.`);
  console.log(`  ${LABEL.ws}: no request per answer; the window holds the token's own calls only.`);
}

function verdict(results: Map<number, { sse: Summary; ws: Summary }>): string {
  const parts: string[] = [];
  for (const [rate, { sse, ws }] of results) {
    parts.push(
      `at ${fmt(rate)}/s WebSocket took ${ratio(ws.server, sse.server)}x the server CPU and ${ratio(ws.client, sse.client)}x the client CPU per round trip, ` +
        `${ratio(ws.down + ws.up, sse.down + sse.up)}x the bytes, p50 ${ratio(ws.p50, sse.p50)}x and p99 ${ratio(ws.p99, sse.p99)}x` +
        (sse.keptRounds < ROUNDS || ws.keptRounds < ROUNDS ? ` (rate kept in ${sse.keptRounds}/${ROUNDS} SSE and ${ws.keptRounds}/${ROUNDS} WS rounds)` : ''),
    );
  }
  const worstP99 = Math.max(...[...results.values()].map((r) => r.sse.p99));
  const deadline = DRAIN_MS;
  return (
    `Verdict: ${parts.join('; ')}. ` +
    `SSE + POST's worst p99 was ${fmt(worstP99, 1)} ms against the relay's ${deadline / 1000} s deadline, so at a developer's sandbox volume (a few events, far below 10/s) ` +
    `latency decides nothing; per round trip WebSocket is ${cheaper(results)}, and spends none of the token's ${RATE_LIMIT_PER_MINUTE} requests a minute, where SSE + POST's counted route spent one per answer (the gateway now leaves out the one owed to a waiting attempt). ` +
    `The real gateway adds a Redis rate-limit script, a Postgres session read and an access-log line to every SSE answer, which this bench leaves out.`
  );
}

function cheaper(results: Map<number, { sse: Summary; ws: Summary }>): string {
  const totals = [...results.values()].map(({ sse, ws }) => (ws.server + ws.client) / (sse.server + sse.client));
  const lo = Math.min(...totals);
  const hi = Math.max(...totals);
  if (hi < 1) return `cheaper, ${lo.toFixed(2)}-${hi.toFixed(2)}x SSE's CPU`;
  if (lo > 1) return `dearer, ${lo.toFixed(2)}-${hi.toFixed(2)}x SSE's CPU`;
  return `${lo.toFixed(2)}-${hi.toFixed(2)}x SSE's CPU`;
}

// ---- main ----------------------------------------------------------------------------------------

const loadText = (): string => loadavg().map((l) => l.toFixed(2)).join(' ');

async function main(): Promise<void> {
  const template = attemptTemplate();
  await new Promise<void>((resolve) => server.listen(PORT, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('the server has no port');
  const base = `http://127.0.0.1:${address.port}`;

  const forward = JSON.stringify(attemptOf(template));
  const phases = RATES.length * ROUNDS * TRANSPORTS.length;
  console.log(`Listen transport: ${LABEL.sse} against ${LABEL.ws}, one server (this process) and one client (a child process), ${base}`);
  console.log(
    `  rates ${RATES.join(', ')}/s after ${fmt(PRIME_SECONDS, 1)} s of each at ${fmt(Math.max(...RATES))}/s; each phase ${fmt(WARMUP_SECONDS, 1)} s unmeasured then ${fmt(SECONDS, 1)} s; ${ROUNDS} rounds of A B per rate; ` +
      `${phases} phases, about ${fmt((phases * (WARMUP_SECONDS + SECONDS + 0.3) + RATES.length * SECONDS + 2 * PRIME_SECONDS) / 60, 1)} min`,
  );
  console.log(
    `  an attempt: ${fmt(Buffer.byteLength(forward))} bytes of JSON (the body ${fmt(Buffer.byteLength(template.body))} bytes, ${Object.keys(template.headers).length} headers); ` +
      `an answer ${fmt(Buffer.byteLength(JSON.stringify({ intento: 'x'.repeat(73), statusCode: 200, duracionMs: 3.2, respuesta: '{"recibido":true}', error: null, mensaje: null })))} bytes`,
  );
  console.log(`  load average before: ${loadText()}`);

  const child = startClient();
  try {
    for (const transport of TRANSPORTS) await ask(child, { cmd: 'connect', transport, base, token, sessionId }, 'connected');
    for (const transport of TRANSPORTS) await phase(child, template, transport, Math.max(...RATES), PRIME_SECONDS);
    const results = new Map<number, { sse: Summary; ws: Summary; pacing: number }>();
    for (const rate of RATES) {
      const pacing = await pacingAlone(template, rate, SECONDS);
      const rounds: Record<Transport, Measured[]> = { sse: [], ws: [] };
      for (let round = 1; round <= ROUNDS; round++) {
        for (const transport of TRANSPORTS) {
          await phase(child, template, transport, rate, WARMUP_SECONDS);
          const m = await phase(child, template, transport, rate, SECONDS);
          rounds[transport].push(m);
          const sorted = [...m.latencies].sort((a, b) => a - b);
          console.log(
            `  ${fmt(rate)}/s round ${round} ${LABEL[transport].padEnd(10)}: p50 ${fmt(percentile(sorted, 0.5), 2)} ms, p99 ${fmt(percentile(sorted, 0.99), 2)} ms; ` +
              `server ${fmt(m.serverMicros)} µs, client ${fmt(m.clientMicros)} µs, ${fmt(m.down + m.up)} bytes per round trip; ` +
              `${kept(m, rate) ? 'kept' : 'BEHIND'} (${fmt(m.sendRate, 1)} sent/s, ${fmt(m.answerRate, 1)} answered/s, ${m.lost + m.refused} lost, ${m.connections} new connections); others ${m.others}%`,
          );
        }
      }
      results.set(rate, { sse: summarize(rounds.sse, rate), ws: summarize(rounds.ws, rate), pacing });
    }

    console.log('\nLatency: the server writes the attempt → the server has its answer (the SSE POST parsed, or the WebSocket frame).');
    console.log('CPU: process.cpuUsage of the server (this process) and of the client, per answered round trip, median of the rounds; the server\'s');
    console.log('  includes the bench\'s pacing timer and the attempts\' ids, measured alone once per rate (the same for both).');
    console.log('Bytes: what the server\'s sockets wrote (down) and read (up), above TCP: for SSE the event with its chunked framing, the POST with its');
    console.log('  request line and headers, and the answer with its headers; for WebSocket the frames with their headers. Median of the rounds.');
    for (const [rate, { sse, ws, pacing }] of results) table(rate, sse, ws, pacing);
    rateLimitArithmetic();
    console.log('\nLeft out on both sides: the dispatcher and Redis pub/sub, TLS and any proxy, the tool\'s own POST to the local receiver.');
    console.log('Left out of SSE + POST only: the gateway\'s Redis rate-limit script, Postgres session read and access log per answer, so its real costs are higher.');
    if (stray > 0) console.log(`(${stray} answers came after their phase had given them up)`);
    console.log(`\n${verdict(results)}`);
    console.log(`\n  load average after: ${loadText()}`);
  } finally {
    if (child.connected) child.send({ cmd: 'exit' } satisfies ToClient);
    stream?.end();
    socket?.close();
    wss.close();
    server.closeAllConnections();
    server.close();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
