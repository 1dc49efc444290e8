import express, { type RequestHandler } from 'express';
import { AppError } from '@svc/contracts';

/** 1 MiB: the largest body any route accepts (a batch of 100 shipments is far below it). */
export const MAX_BODY_BYTES = 1024 * 1024;

const parseJson = express.json({ limit: MAX_BODY_BYTES, strict: false, type: () => true });
const readRaw = express.raw({ limit: MAX_BODY_BYTES, type: () => true });

function hasBody(req: Parameters<RequestHandler>[0]): boolean {
  const length = req.headers['content-length'];
  if (length !== undefined) return length !== '0';
  return req.headers['transfer-encoding'] !== undefined;
}

/**
 * A body must be JSON (415 otherwise), at most 1 MiB (413) and parseable (400 INVALID_JSON):
 * the errors are translated by the error middleware.
 */
export const jsonBody: RequestHandler = (req, res, next) => {
  if (!hasBody(req)) return next();
  if (req.headers['content-type'] === undefined && req.headers['content-length'] === undefined) {
    // A chunked body without a type may well be empty (streaming clients send "no body" so):
    // only a body that turns out to have bytes is not JSON.
    return readRaw(req, res, (err?: unknown) => {
      if (err) return next(err);
      const empty = Buffer.isBuffer(req.body) && req.body.length === 0;
      req.body = undefined;
      next(empty ? undefined : new AppError('UNSUPPORTED_MEDIA_TYPE', 'the body must be application/json'));
    });
  }
  if (!req.is('application/json')) {
    return next(new AppError('UNSUPPORTED_MEDIA_TYPE', 'the body must be application/json'));
  }
  return parseJson(req, res, next);
};
