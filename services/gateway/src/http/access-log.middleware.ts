import type { Request, RequestHandler } from 'express';
import type { Logger } from '@svc/observability';
import { AppError } from '@svc/contracts';
import type { GatewayMetrics } from '../observability/gateway-metrics';

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Request {
      /** The full template of the route that matched (`/api/v1/guias/:numeroGuia/simular`), set by `route()`. */
      routeTemplate?: string;
    }
  }
}

/** The route label of answers written by the HTTP layer itself, before any route could be read. */
export const UNPARSED_ROUTE = '(unparsed)';

export interface RequestRecord {
  requestId: string;
  method: string;
  route: string;
  status: number;
  seconds: number;
  empresaId?: string;
  /** Why the HTTP layer refused the request (the parser's error code), for answers it wrote itself. */
  reason?: string;
}

/** The access log line and the request metrics, for an answer from the app or from the HTTP layer. */
export function recordRequest(logger: Logger, metrics: GatewayMetrics, r: RequestRecord, timed = true): void {
  const labels = { method: r.method, route: r.route, status: String(r.status) };
  metrics.httpRequests.inc(labels);
  if (timed) metrics.httpDuration.observe(labels, r.seconds);
  if (logger.isLevelEnabled('info')) {
    logger.info(
      {
        requestId: r.requestId,
        method: r.method,
        route: r.route,
        status: r.status,
        ms: Math.round(r.seconds * 1e4) / 10,
        empresaId: r.empresaId,
        ...(r.reason === undefined ? {} : { reason: r.reason }),
      },
      'request',
    );
  }
}

/**
 * Remembers the deepest mount point the request entered. The router puts `req.baseUrl` back to
 * the parent's value when an error leaves a mounted router, so by the time the response finishes
 * on an error path, `baseUrl` (and with it the prefix of the template) is gone.
 */
function trackMount(req: Request): () => string | undefined {
  let mount: string | undefined;
  let current = req.baseUrl;
  Object.defineProperty(req, 'baseUrl', {
    configurable: true,
    enumerable: true,
    get: () => current,
    set: (value: string) => {
      current = value;
      if (value) mount = value;
    },
  });
  return () => mount;
}

/**
 * One log line and one metric sample per request, labelled by route template (never the raw path:
 * ids would make the label set unbounded).
 */
export function accessLog(logger: Logger, metrics: GatewayMetrics): RequestHandler {
  return (req, res, next) => {
    const start = process.hrtime.bigint();
    const mount = trackMount(req);
    res.on('finish', () => {
      // A route registered without route() has no routeTemplate: its path under the deepest mount.
      // Unrouted requests (refused before routing, or unknown paths) keep only their mount point.
      const entered = mount();
      const matched = req.route ? `${entered ?? ''}${String((req.route as { path: string }).path)}` : undefined;
      const route = req.routeTemplate ?? matched ?? (entered ? `${entered}/*` : 'unmatched');
      recordRequest(logger, metrics, {
        requestId: req.requestId,
        method: req.method,
        route,
        status: res.statusCode,
        seconds: Number(process.hrtime.bigint() - start) / 1e9,
        empresaId: req.principal?.empresa.id,
      });
    });
    // HTTP/1.1 requires Host. The server is created with Node's own check off (it answers an empty
    // 400): refused here, the first step that both answers with the envelope and is counted.
    if (req.headers.host === undefined && req.httpVersionMajor === 1 && req.httpVersionMinor === 1) {
      res.setHeader('Connection', 'close');
      next(new AppError('VALIDATION_ERROR', 'the Host header is required'));
      return;
    }
    next();
  };
}
