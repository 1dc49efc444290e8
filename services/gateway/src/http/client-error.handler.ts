import { randomUUID } from 'node:crypto';
import { STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from '@svc/observability';
import { errorEnvelope, type ErrorCode } from '@svc/contracts';
import type { GatewayMetrics } from '../observability/gateway-metrics';
import { recordRequest, UNPARSED_ROUTE } from './access-log.middleware';
import { requestIdFrom } from './request-id.middleware';

interface Refusal {
  status: number;
  code: ErrorCode;
  message: string;
}

/** llhttp's reasons are short phrases; the bound keeps the message short whatever a later version says. */
const MAX_REASON_CHARS = 200;

/**
 * What the parser's error means to the caller. The statuses are the ones Node itself would write;
 * the codes are the closest of the closed catalog, which has none of its own for 408 and 431.
 */
function refusalFor(err: NodeJS.ErrnoException & { reason?: unknown }): Refusal {
  switch (err.code) {
    case 'HPE_HEADER_OVERFLOW':
      return { status: 431, code: 'PAYLOAD_TOO_LARGE', message: 'the request headers are too large' };
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return { status: 413, code: 'PAYLOAD_TOO_LARGE', message: 'the chunk extensions are too large' };
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return { status: 408, code: 'VALIDATION_ERROR', message: 'the request was not received in time' };
    default: {
      // llhttp's reasons are fixed phrases ("Invalid method encountered"), never the caller's bytes.
      const reason = typeof err.reason === 'string' ? `: ${err.reason.slice(0, MAX_REASON_CHARS)}` : '';
      return { status: 400, code: 'VALIDATION_ERROR', message: `malformed HTTP request${reason}` };
    }
  }
}

/** The response in flight on a keep-alive socket, if any (Node's own field; it checks it the same way). */
function inFlight(socket: Socket): ServerResponse | undefined {
  return (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage ?? undefined;
}

/** A complete HTTP/1.1 answer for a socket whose request could not be read. */
function rawResponse(refusal: Refusal, requestId: string): string {
  const body = JSON.stringify(errorEnvelope(refusal.code, refusal.message));
  return [
    `HTTP/1.1 ${refusal.status} ${STATUS_CODES[refusal.status] ?? 'Error'}`,
    'Content-Type: application/json; charset=utf-8',
    `Content-Length: ${Buffer.byteLength(body)}`,
    `X-Request-Id: ${requestId}`,
    'Connection: close',
    '',
    body,
  ].join('\r\n');
}

/** How long a refused socket may take to flush its answer before it is dropped. */
const FLUSH_MS = 1000;

/**
 * Answers what Node's HTTP layer refuses before the app sees a request (a bad request line or
 * method, headers over the limit, conflicting lengths, an `Expect` other than 100-continue,
 * CONNECT) with the error envelope and an `X-Request-Id`, counted and logged like any other
 * answer. Without these listeners Node writes a bare status line with no body, or nothing.
 */
export function answerClientErrors(server: Server, logger: Logger, metrics: GatewayMetrics): void {
  server.on('clientError', (err: NodeJS.ErrnoException, duplex) => {
    const socket = duplex as Socket;
    const pending = inFlight(socket);
    // A reset or a closed socket has no one to answer; an answer already started must not be
    // interleaved with another (Node's default handler makes the same two checks).
    if (err.code === 'ECONNRESET' || !socket.writable || pending?.headersSent) {
      socket.destroy();
      return;
    }
    const refusal = refusalFor(err);
    // The parser failed in the body of a request already read: keep that request's id.
    const previousId = pending?.getHeader('x-request-id');
    const requestId = typeof previousId === 'string' ? previousId : randomUUID();
    const method = pending?.req?.method ?? UNPARSED_ROUTE;
    recordRequest(logger, metrics, { requestId, method, route: UNPARSED_ROUTE, status: refusal.status, seconds: 0, reason: err.code }, false);
    endWith(socket, rawResponse(refusal, requestId));
  });

  // Only `Expect: 100-continue` is understood (Node answers it itself); any other expectation is 417.
  server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
    const refusal: Refusal = { status: 417, code: 'VALIDATION_ERROR', message: 'unsupported Expect header; only 100-continue is understood' };
    refuse(req, res, refusal, 'EXPECTATION_FAILED', logger, metrics);
  });

  // CONNECT never reaches the app: without a listener Node closes the socket with no answer at all.
  server.on('connect', (req: IncomingMessage, duplex) => {
    const socket = duplex as Socket;
    const requestId = requestIdFrom(req.headers);
    recordRequest(logger, metrics, { requestId, method: 'CONNECT', route: UNPARSED_ROUTE, status: 405, seconds: 0, reason: 'CONNECT' }, false);
    if (!socket.writable) {
      socket.destroy();
      return;
    }
    const refusal: Refusal = { status: 405, code: 'METHOD_NOT_ALLOWED', message: 'CONNECT is not supported' };
    endWith(socket, rawResponse(refusal, requestId));
  });
}

/** Answers a request the HTTP layer read but will not pass on, and closes the connection. */
function refuse(req: IncomingMessage, res: ServerResponse, refusal: Refusal, reason: string, logger: Logger, metrics: GatewayMetrics): void {
  const requestId = requestIdFrom(req.headers);
  const body = JSON.stringify(errorEnvelope(refusal.code, refusal.message));
  res.shouldKeepAlive = false;
  res.writeHead(refusal.status, {
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': Buffer.byteLength(body),
    'X-Request-Id': requestId,
    Connection: 'close',
  });
  res.end(body);
  recordRequest(logger, metrics, { requestId, method: req.method ?? UNPARSED_ROUTE, route: UNPARSED_ROUTE, status: refusal.status, seconds: 0, reason }, false);
}

/** Sends the answer, then drops the socket: once flushed, or after FLUSH_MS if the peer does not read. */
function endWith(socket: Socket, answer: string): void {
  const timer = setTimeout(() => socket.destroy(), FLUSH_MS);
  timer.unref();
  socket.end(answer, () => {
    clearTimeout(timer);
    socket.destroy();
  });
}
