// The benchmarks' receiver, in its own process: HTTPS with keep-alive on loopback. By default it
// answers 200 at once with an empty body, on RECEIVER_PORT. The parent talks to it over IPC and may
// make it a real receiver:
// - `RECEIVER_EXTRA_PORTS` (`first-last`): the same receiver also listens on each of those ports,
//   one origin per company of the dispatcher bench's fleet, as real companies have their own hosts;
// - `config { delayMs, hang }`: every 2xx is answered `delayMs` after the request's body arrived
//   (a receiver that queues the work, writes a row, sits behind a load balancer); a request whose
//   path is in `hang` is never answered (the sender gives up at its deadline); taking a path out of
//   `hang` answers its held requests at once;
// - a path under `/fail/` is answered 500 at once, and each such request's arrival and answer are
//   kept (`attempts`), so the gaps between a delivery's attempts are measured where they land.
// It counts requests, TLS handshakes (new sessions) and the requests it holds at once (sends in
// flight as the receivers see them), and, while asked to, notes when each delivery (X-Request-Id)
// arrived, and with `parse` the shipment number of its body.
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';

const certs = join(__dirname, '..', '..', '.test-certs');
const port = Number(process.env.RECEIVER_PORT ?? 3943);
const extra = /^(\d+)-(\d+)$/.exec(process.env.RECEIVER_EXTRA_PORTS ?? '');
const ports = [port];
if (extra) for (let p = Number(extra[1]); p <= Number(extra[2]); p++) ports.push(p);

const now = (): number => performance.timeOrigin + performance.now();

/** A receipt: delivery id, arrival (ms since the epoch), and with `parse` the body's `data.numeroGuia`. */
type Receipt = [string, number] | [string, number, string];

let requests = 0;
let answered = 0;
let handshakes = 0;
let resumed = 0;
let inFlight = 0;
let peakInFlight = 0;
let delayMs = 0;
let hang = new Set<string>();
/** Requests held unanswered, by path (the hanging webhooks'). */
const held = new Map<string, Set<ServerResponse>>();
let recording: false | 'ids' | 'parse' = false;
let receipts: Receipt[] = [];
/** `/fail/` requests: delivery id, arrival, answer. */
let failed: Array<[string, number, number]> = [];

function ok(res: ServerResponse): void {
  if (res.destroyed || res.writableEnded) return;
  res.writeHead(200, { 'content-length': '0' }).end();
  answered++;
}

function handle(req: IncomingMessage, res: ServerResponse): void {
  inFlight++;
  if (inFlight > peakInFlight) peakInFlight = inFlight;
  res.once('close', () => inFlight--);
  const path = req.url ?? '/';
  const chunks: Buffer[] | undefined = recording === 'parse' ? [] : undefined;
  if (chunks) req.on('data', (c: Buffer) => chunks.push(c));
  else req.resume();
  req.on('end', () => {
    requests++;
    const at = now();
    const id = String(req.headers['x-request-id']);
    if (path.startsWith('/fail/')) {
      res.writeHead(500, { 'content-length': '0' }).end();
      failed.push([id, at, now()]);
      return;
    }
    if (recording) {
      let numero: string | undefined;
      if (chunks) {
        try {
          numero = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { data?: { numeroGuia?: string } }).data?.numeroGuia;
        } catch {}
      }
      receipts.push(numero === undefined ? [id, at] : [id, at, numero]);
    }
    if (hang.has(path)) {
      let set = held.get(path);
      if (!set) held.set(path, (set = new Set()));
      set.add(res);
      res.once('close', () => set.delete(res));
      return;
    }
    if (delayMs > 0) setTimeout(ok, delayMs, res);
    else ok(res);
  });
}

// One set of session-ticket keys for every port: the ports stand for companies' hosts, and undici
// keys its TLS session cache by host name alone, so with a set per port (Node's default) a session
// from one port was offered to the next and refused, and nearly every new connection was a full
// handshake (21 resumed of 1,617). Distinct hosts would each resume their own.
const ticketKeys = randomBytes(48);
const options = { key: readFileSync(join(certs, 'receiver.key')), cert: readFileSync(join(certs, 'receiver.pem')), keepAliveTimeout: 60_000, ticketKeys };
const servers: Server[] = ports.map(() => {
  const server = createServer(options, handle);
  server.on('secureConnection', (socket) => {
    handshakes++;
    if (socket.isSessionReused()) resumed++;
  });
  return server;
});

interface Message {
  cmd: string;
  delayMs?: number;
  hang?: string[];
  parse?: boolean;
}

process.on('message', (msg: Message) => {
  switch (msg.cmd) {
    case 'stats':
      process.send?.({ requests, answered, handshakes, resumed, inFlight, held: [...held.values()].reduce((n, s) => n + s.size, 0) });
      break;
    case 'config': {
      delayMs = msg.delayMs ?? delayMs;
      hang = new Set(msg.hang ?? hang);
      for (const [path, set] of held) {
        if (hang.has(path)) continue;
        for (const res of set) ok(res);
        held.delete(path);
      }
      process.send?.({ configured: true });
      break;
    }
    case 'peak':
      // The most requests held at once since the last ask; starts again from those held now.
      process.send?.({ peakInFlight });
      peakInFlight = inFlight;
      break;
    case 'record':
      receipts = [];
      recording = msg.parse ? 'parse' : 'ids';
      process.send?.({ ok: true });
      break;
    case 'receipts':
      recording = false;
      process.send?.({ receipts });
      receipts = [];
      break;
    case 'attempts':
      process.send?.({ attempts: failed });
      failed = [];
      break;
    case 'exit':
      for (const s of servers) s.close();
      process.exit(0);
  }
});

let listening = 0;
servers.forEach((server, i) =>
  server.listen(ports[i], '127.0.0.1', () => {
    if (++listening === servers.length) process.send?.({ listening: port });
  }),
);
