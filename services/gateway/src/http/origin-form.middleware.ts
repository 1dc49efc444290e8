import type { RequestHandler } from 'express';
import { errorEnvelope } from '@svc/contracts';
import { sendJson } from './send-json';

/**
 * Only origin-form request targets (`/path?query`) are routed. Node hands an absolute-form target
 * (`GET http://x/internal/v1/... HTTP/1.1`, which only a proxy should receive) to express as it
 * came, and express would route its path: a rule in front that matches paths would never see
 * `/internal/v1` in it. Answered 404 at once, in the request's own tick, as any unknown path is.
 */
export const originFormOnly: RequestHandler = (req, res, next) => {
  if (req.url.startsWith('/')) {
    next();
    return;
  }
  sendJson(res, 404, errorEnvelope('NOT_FOUND', 'no route: the request target must be a path'));
};
