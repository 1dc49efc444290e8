import { setTimeout as sleep } from 'node:timers/promises';
import { createParser } from 'eventsource-parser';
import { call, CliError, envelopeOf, networkReason, type ApiOptions } from './api.client.js';

/** The contract's deadline for an answer: the local receiver gets as long as a real one. */
const ANSWER_TIMEOUT_MS = 5000;
/** How much of the local answer's body is reported (the delivery log keeps as much). */
const MAX_RESPONSE = 1024;
/** Reconnection waits: soon after a blip, then at most every 10 s. */
const RECONNECT_MS = { first: 1000, max: 10_000 };

export interface ListenOptions extends ApiOptions {
  forwardTo: URL;
  events: string[];
  print(line: string): void;
  warn(line: string): void;
}

interface Session {
  id: string;
  secret: string;
  stream: string;
}

interface Forward {
  intento: string;
  evento: string;
  body: string;
  headers: Record<string, string>;
}

interface Answer {
  intento: string;
  statusCode: number;
  duracionMs: number;
  respuesta: string | null;
  error: 'TIMEOUT' | 'CONNECTION' | null;
  mensaje: string | null;
}

const numeroGuiaOf = (body: string): string => {
  try {
    const parsed = JSON.parse(body) as { data?: { numeroGuia?: unknown } };
    return typeof parsed.data?.numeroGuia === 'string' ? parsed.data.numeroGuia : '-';
  } catch {
    return '-';
  }
};

const clock = (): string => new Date().toISOString().slice(11, 23);

/** POSTs one attempt to the local URL, exactly as received, and says what came back. */
async function forwardLocally(target: URL, f: Forward): Promise<Answer> {
  const started = performance.now();
  const answer: Answer = { intento: f.intento, statusCode: 0, duracionMs: 0, respuesta: null, error: null, mensaje: null };
  try {
    const res = await fetch(target, { method: 'POST', headers: f.headers, body: f.body, redirect: 'manual', signal: AbortSignal.timeout(ANSWER_TIMEOUT_MS) });
    answer.statusCode = res.status;
    answer.respuesta = (await res.text()).slice(0, MAX_RESPONSE);
  } catch (err) {
    const timedOut = (err as Error).name === 'TimeoutError';
    answer.error = timedOut ? 'TIMEOUT' : 'CONNECTION';
    answer.mensaje = timedOut ? `${target.href} did not answer within ${ANSWER_TIMEOUT_MS / 1000} s` : `${target.href} refused or dropped the connection (${networkReason(err)})`;
  }
  answer.duracionMs = Math.round((performance.now() - started) * 10) / 10;
  return answer;
}

/**
 * `svc listen`: opens a listening session, prints its secret, and from then on POSTs every event
 * its stream carries to `forwardTo`, printing one line per delivery and reporting the local answer,
 * which decides the attempt. Reconnects when the stream drops (a new session, with a new secret,
 * when the old one has ended). Resolves with the exit status once interrupted.
 */
export async function listen(o: ListenOptions): Promise<number> {
  const open = async (): Promise<Session> => {
    const s = await call<Session>(o, 'POST', '/api/v1/escuchas', { ...(o.events.length > 0 ? { eventos: o.events } : {}), destino: o.forwardTo.href });
    o.print(`> Ready. Listening session ${s.id}. Your webhook signing secret is ${s.secret}`);
    o.print(`> Forwarding ${o.events.length > 0 ? o.events.join(', ') : 'every sandbox event'} to ${o.forwardTo.href} (Ctrl-C to quit)`);
    return s;
  };
  let session = await open();
  let stopping = false;
  const controller = { current: new AbortController() };
  const inFlight = new Set<Promise<void>>();

  const stop = async (): Promise<void> => {
    if (stopping) return;
    stopping = true;
    controller.current.abort();
    await Promise.allSettled([...inFlight]);
    // Closing the stream ends the session too; this says so at once, whatever the network did.
    await call(o, 'DELETE', `/api/v1/escuchas/${session.id}`, undefined, AbortSignal.timeout(3000)).catch(() => undefined);
    o.print('> Listening session ended.');
  };
  const stopped = new Promise<void>((resolve) => {
    const onSignal = (): void => void stop().then(resolve);
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
  });

  const deliver = async (f: Forward): Promise<void> => {
    const answer = await forwardLocally(o.forwardTo, f);
    const status = answer.statusCode === 0 ? (answer.error ?? 'ERR') : String(answer.statusCode);
    const why = answer.mensaje ? `  ${answer.mensaje}` : '';
    o.print(`${clock()}  ${f.evento.padEnd(20)}  ${numeroGuiaOf(f.body)}  ${status}  ${Math.round(answer.duracionMs)} ms${why}`);
    // The attempt in the path: the answer to an attempt the platform waits for is outside the token's rate limit.
    await call(o, 'POST', `/api/v1/escuchas/${session.id}/respuestas/${encodeURIComponent(answer.intento)}`, answer).catch((err: unknown) => o.warn(`> answer not reported: ${(err as Error).message}`));
  };

  const streamOnce = async (onOpen: () => void): Promise<void> => {
    controller.current = new AbortController();
    const url = new URL(`/api/v1/escuchas/${session.id}/stream`, o.api);
    let res: Response;
    try {
      res = await fetch(url, { headers: { authorization: `Bearer ${o.token}`, accept: 'text/event-stream' }, signal: controller.current.signal });
    } catch (err) {
      throw new Error(`cannot reach ${o.api} (${networkReason(err)})`);
    }
    if (!res.ok || res.body === null) await envelopeOf(o, res, 'GET', url.pathname);
    const parser = createParser({
      onEvent(event) {
        if (event.event === 'abierta') onOpen();
        if (event.event !== 'entrega') return;
        const p = deliver(JSON.parse(event.data) as Forward).finally(() => inFlight.delete(p));
        inFlight.add(p);
      },
    });
    const decoder = new TextDecoder();
    for await (const chunk of res.body!) parser.feed(decoder.decode(chunk as Uint8Array, { stream: true }));
  };

  const run = async (): Promise<void> => {
    let wait = RECONNECT_MS.first;
    let dropped = false;
    while (!stopping) {
      let reason: string;
      try {
        await streamOnce(() => {
          if (dropped) o.print('> Reconnected.');
          dropped = false;
          wait = RECONNECT_MS.first;
        });
        reason = 'the API closed the stream';
      } catch (err) {
        if (stopping) return;
        let failure = err;
        if (failure instanceof CliError && failure.status === 404) {
          o.print('> The listening session had ended; opening a new one (its secret is new).');
          try {
            session = await open();
            continue;
          } catch (openErr) {
            failure = openErr;
          }
        }
        // Only an unreachable API is waited out; a refusal (a revoked token, the limit) is final.
        if (failure instanceof CliError && failure.status !== 0 && failure.status < 500) throw failure;
        reason = (failure as Error).message;
      }
      if (stopping) return;
      dropped = true;
      o.warn(`> Stream dropped (${reason}); reconnecting in ${wait / 1000} s...`);
      await sleep(wait);
      wait = Math.min(wait * 2, RECONNECT_MS.max);
    }
  };

  await Promise.race([run(), stopped]);
  if (!stopping) await stop();
  return 0;
}
