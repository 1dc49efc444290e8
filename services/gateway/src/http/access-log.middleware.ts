import type { RequestHandler } from 'express';
import type { Logger } from '@svc/observability';
import type { GatewayMetrics } from '../observability/gateway-metrics';

/**
 * One log line and one metric sample per request, labelled by route template (never the raw path:
 * ids would make the label set unbounded).
 */
export function accessLog(logger: Logger, metrics: GatewayMetrics): RequestHandler {
  return (req, res, next) => {
    const start = process.hrtime.bigint();
    res.on('finish', () => {
      const seconds = Number(process.hrtime.bigint() - start) / 1e9;
      // Unrouted requests (refused before routing, or unknown paths) keep only their mount point.
      const template = req.route
        ? `${req.baseUrl}${String((req.route as { path: string }).path)}`
        : req.baseUrl
          ? `${req.baseUrl}/*`
          : 'unmatched';
      const labels = { method: req.method, route: template, status: String(res.statusCode) };
      metrics.httpRequests.inc(labels);
      metrics.httpDuration.observe(labels, seconds);
      if (logger.isLevelEnabled('info')) {
        logger.info(
          {
            requestId: req.requestId,
            method: req.method,
            route: template,
            status: res.statusCode,
            ms: Math.round(seconds * 1e4) / 10,
            empresaId: req.principal?.empresa.id,
          },
          'request',
        );
      }
    });
    next();
  };
}
