// The client of `pnpm bench:listen` (bench/listen/transport.ts starts it as a child process, so its
// CPU is its own): `svc listen`'s side of each transport. Over SSE it reads the stream with fetch
// and eventsource-parser and reports each answer with a POST, as packages/cli/src/listen.command.ts
// and api.client.ts do; over WebSocket it answers on the socket the attempt came on.
import { createParser } from 'eventsource-parser';
import WebSocket from 'ws';
import type { ListenForward } from '@svc/contracts';
import { paths, textOf, type SocketMessage, type ToBench, type ToClient, type ToolAnswer, type Transport } from './protocol';

/** api.client.ts's `call()` gives every request 15 s, so each answer's POST carries a timer of its own as the tool's does. */
const REQUEST_TIMEOUT_MS = 15_000;
/**
 * What the local receiver answered: the bench leaves out the tool's POST to the laptop's URL,
 * the same work whichever transport brought the attempt, so every answer is this one.
 */
const LOCAL_STATUS = 200;
const LOCAL_DURATION_MS = 3.2;
const LOCAL_RESPONSE = '{"recibido":true}';

let answered = 0;
let refused = 0;

const tell = (m: ToBench): void => {
  process.send?.(m);
};

const answerOf = (f: ListenForward): ToolAnswer => ({
  intento: f.intento,
  statusCode: LOCAL_STATUS,
  duracionMs: LOCAL_DURATION_MS,
  respuesta: LOCAL_RESPONSE,
  error: null,
  mensaje: null,
});

/** The stream, read as `svc listen` reads it; resolves once its `abierta` event has come. */
async function connectSse(base: string, token: string, sessionId: string): Promise<void> {
  const res = await fetch(new URL(paths.stream(sessionId), base), { headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' } });
  if (!res.ok || res.body === null) throw new Error(`the stream answered ${res.status}`);
  const answersUrl = new URL(paths.answers(sessionId), base);
  // The tool's `call()`: bearer token, JSON both ways, the envelope read and parsed.
  const report = async (f: ListenForward): Promise<void> => {
    const answer = await fetch(answersUrl, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, accept: 'application/json', 'content-type': 'application/json' },
      body: JSON.stringify(answerOf(f)),
      redirect: 'manual',
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    const envelope = JSON.parse(await answer.text()) as { success?: boolean };
    if (envelope.success === true) answered++;
    else refused++;
  };
  let opened: () => void = () => undefined;
  const open = new Promise<void>((resolve) => (opened = resolve));
  const parser = createParser({
    onEvent(event) {
      if (event.event === 'abierta') opened();
      if (event.event !== 'entrega') return;
      report(JSON.parse(event.data) as ListenForward).catch((err: unknown) => {
        refused++;
        process.stderr.write(`answer not reported: ${(err as Error).message}\n`);
      });
    },
  });
  const body = res.body;
  const read = async (): Promise<void> => {
    const decoder = new TextDecoder();
    for await (const chunk of body) parser.feed(decoder.decode(chunk, { stream: true }));
  };
  read().catch((err: unknown) => fail(`the stream failed: ${(err as Error).message}`));
  await open;
}


/** The socket, the token checked once at its upgrade; each attempt is answered on it. */
async function connectWs(base: string, token: string, sessionId: string): Promise<void> {
  const url = new URL(paths.socket(sessionId), base.replace(/^http/, 'ws'));
  // No compression on either side (ws's server default): the frames carry the JSON as it is, as the SSE stream does.
  const ws = new WebSocket(url, { headers: { authorization: `Bearer ${token}` }, perMessageDeflate: false });
  await new Promise<void>((resolve, reject) => {
    ws.once('error', reject);
    ws.on('message', (data) => {
      const m = JSON.parse(textOf(data)) as SocketMessage;
      if (m.tipo === 'abierta') resolve();
      if (m.tipo !== 'entrega') return;
      const reply: SocketMessage = { tipo: 'respuesta', data: answerOf(m.data) };
      ws.send(JSON.stringify(reply));
      answered++;
    });
  });
  ws.on('error', (err) => fail(`the socket failed: ${err.message}`));
}

function fail(message: string): void {
  tell({ type: 'failed', message });
  process.exitCode = 1;
  process.disconnect?.();
}

const connect = (transport: Transport, base: string, token: string, sessionId: string): Promise<void> =>
  transport === 'sse' ? connectSse(base, token, sessionId) : connectWs(base, token, sessionId);

process.on('message', (m: ToClient) => {
  if (m.cmd === 'connect') {
    connect(m.transport, m.base, m.token, m.sessionId).then(
      () => tell({ type: 'connected', transport: m.transport }),
      (err: unknown) => fail(`${m.transport} did not connect: ${(err as Error).message}`),
    );
  } else if (m.cmd === 'usage') {
    const cpu = process.cpuUsage();
    tell({ type: 'usage', cpuMicros: cpu.user + cpu.system, answered, refused });
  } else {
    process.exit(0);
  }
});
