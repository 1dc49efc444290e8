// What the two processes of `pnpm bench:listen` share: the routes, the messages on each transport,
// and the IPC between the bench (the server) and its client child.
import type { RawData } from 'ws';
import type { ListenAnswerRequest, ListenForward } from '@svc/contracts';

export type Transport = 'sse' | 'ws';

/** Each measured rate runs both, in this order, round after round (A B A B ...). */
export const TRANSPORTS: readonly Transport[] = ['sse', 'ws'];

export const LABEL: Record<Transport, string> = { sse: 'SSE + POST', ws: 'WebSocket' };

/**
 * The gateway's own paths (services/gateway/src/listen/listen.routes.ts), so the requests carry as
 * many bytes as the real ones; the WebSocket's is what such a route could be.
 */
export const paths = {
  stream: (sessionId: string): string => `/api/v1/escuchas/${sessionId}/stream`,
  answers: (sessionId: string): string => `/api/v1/escuchas/${sessionId}/respuestas`,
  socket: (sessionId: string): string => `/api/v1/escuchas/${sessionId}/socket`,
};

/** What `svc listen` reports for an attempt (listen.command.ts's `Answer`): the route or the socket names the session. */
export type ToolAnswer = Required<ListenAnswerRequest>;

/** A WebSocket frame's message: the SSE stream's event name becomes `tipo`, its data `data`. */
export type SocketMessage = { tipo: 'abierta'; data: { id: string } } | { tipo: 'entrega'; data: ListenForward } | { tipo: 'respuesta'; data: ToolAnswer };

/** Bench → client. */
export type ToClient = { cmd: 'connect'; transport: Transport; base: string; token: string; sessionId: string } | { cmd: 'usage' } | { cmd: 'exit' };

/** Client → bench. */
export type ToBench =
  | { type: 'connected'; transport: Transport }
  /** The client's CPU so far (process.cpuUsage, user + system, µs), answers sent and answers the server refused. */
  | { type: 'usage'; cpuMicros: number; answered: number; refused: number }
  | { type: 'failed'; message: string };

/** A WebSocket message's text (ws hands a Buffer unless told otherwise; fragments come as several). */
export function textOf(data: RawData): string {
  if (Buffer.isBuffer(data)) return data.toString('utf8');
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  return Buffer.from(data).toString('utf8');
}
