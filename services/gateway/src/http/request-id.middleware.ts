import { randomUUID } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { RequestHandler } from 'express';

const SAFE = /^[A-Za-z0-9._:-]{8,128}$/;

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Request {
      /** Carried into the event and its deliveries, returned in `X-Request-Id`. */
      requestId: string;
    }
  }
}

/** Keeps a caller's well-formed `X-Request-Id` (for tracing across systems), else makes one. */
export function requestIdFrom(headers: IncomingHttpHeaders): string {
  const incoming = headers['x-request-id'];
  return typeof incoming === 'string' && SAFE.test(incoming) ? incoming : randomUUID();
}

export const requestId: RequestHandler = (req, res, next) => {
  req.requestId = requestIdFrom(req.headers);
  res.setHeader('X-Request-Id', req.requestId);
  next();
};
