import type { ErrorRequestHandler, RequestHandler } from 'express';
import type { Logger } from '@svc/observability';
import { AppError, errorEnvelope } from '@svc/contracts';
import { isUnavailableError } from './unavailable';
import { sendJson } from './send-json';

/** body-parser's error types, translated to the contract's codes. */
function fromBodyParser(err: unknown): AppError | undefined {
  const type = (err as { type?: unknown } | null)?.type;
  switch (type) {
    case 'entity.parse.failed':
      return new AppError('INVALID_JSON', 'the body is not valid JSON');
    case 'entity.too.large':
      return new AppError('PAYLOAD_TOO_LARGE', 'the body is larger than 1 MiB');
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return new AppError('UNSUPPORTED_MEDIA_TYPE', 'unsupported body encoding or charset');
    case 'request.aborted':
    case 'request.size.invalid':
    case 'stream.encoding.set':
      return new AppError('VALIDATION_ERROR', 'the body could not be read');
    default:
      // A compressed body that does not inflate: body-parser passes zlib's error on as a bare 400.
      if ((err as { status?: unknown } | null)?.status === 400) {
        return new AppError('INVALID_JSON', 'the body could not be decoded');
      }
      return undefined;
  }
}

/** The router could not percent-decode a path parameter: no resource can have that name. */
function fromRouter(err: unknown): AppError | undefined {
  if (err instanceof URIError && (err as { status?: unknown }).status === 400) {
    return new AppError('NOT_FOUND', 'no such resource: the path is not validly percent-encoded');
  }
  return undefined;
}

export const notFound: RequestHandler = (req) => {
  throw new AppError('NOT_FOUND', `no route ${req.method} ${req.path}`);
};

/** The one place that writes the error envelope; anything unknown is logged and becomes a bare 500. */
export function errorMiddleware(logger: Logger): ErrorRequestHandler {
  return (err: unknown, req, res, _next) => {
    let appError = err instanceof AppError ? err : (fromRouter(err) ?? fromBodyParser(err));
    if (!appError) {
      if (isUnavailableError(err)) {
        logger.warn({ requestId: req.requestId, err: errSummary(err) }, 'dependency unavailable');
        appError = new AppError('SERVICE_UNAVAILABLE', 'a backing service is unavailable; retry shortly');
      } else {
        logger.error({ requestId: req.requestId, err: errSummary(err) }, 'unhandled error');
        appError = new AppError('INTERNAL_ERROR', `internal error (request id ${req.requestId})`);
      }
    }
    if (res.headersSent) {
      res.destroy();
      return;
    }
    for (const [k, v] of Object.entries(appError.headers)) res.setHeader(k, v);
    if (appError.code === 'SERVICE_UNAVAILABLE') res.setHeader('Retry-After', '5');
    sendJson(res, appError.status, errorEnvelope(appError.code, appError.message));
  };
}

/** Name, message and stack only: never the request, whose headers hold the bearer token. */
export function errSummary(err: unknown): { name: string; message: string; stack?: string } {
  if (typeof err === 'object' && err !== null && 'message' in err) {
    const e = err as { name?: unknown; message: unknown; stack?: unknown };
    return { name: String(e.name ?? 'Error'), message: String(e.message), stack: typeof e.stack === 'string' ? e.stack : undefined };
  }
  return { name: 'NonError', message: String(err) };
}
