import express, { Router, type Express } from 'express';
import { safeEqual } from './auth/token';
import { adminOnly, authenticate } from './auth/auth.middleware';
import { defaultRateHeaders, rateLimit } from './rate-limit/rate-limit.middleware';
import { jsonBody } from './http/body.middleware';
import { requestId } from './http/request-id.middleware';
import { accessLog } from './http/access-log.middleware';
import { errorMiddleware, notFound } from './http/error.middleware';
import { mountCompanyRoutes } from './companies/company.routes';
import { mountCompanyInternalRoutes } from './companies/company.internal-routes';
import { mountShipmentRoutes, mountShipmentInternalRoutes } from './shipments/shipment.routes';
import { mountWebhookRoutes, mountWebhookInternalRoutes } from './webhooks/webhook.routes';
import type { GatewayDeps } from './deps';

/**
 * The flow of a request: request id → access log → (internal: admin token | api: rate headers →
 * authentication → rate limit) → JSON body → route → error envelope.
 */
export function createApp(deps: GatewayDeps): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');

  app.use(requestId);
  app.use(accessLog(deps.logger, deps.metrics));

  const internal = Router({ strict: false });
  mountCompanyInternalRoutes(internal, deps);
  mountShipmentInternalRoutes(internal, deps);
  mountWebhookInternalRoutes(internal, deps);
  internal.use(notFound);
  app.use('/internal/v1', adminOnly(deps.config.adminToken, safeEqual), jsonBody, internal);

  const api = Router({ strict: false });
  mountCompanyRoutes(api, deps);
  mountShipmentRoutes(api, deps);
  mountWebhookRoutes(api, deps);
  api.use(notFound);
  app.use(
    '/api/v1',
    defaultRateHeaders(deps.rateLimiter.limit),
    authenticate(deps.db, deps.tokenCache, deps.metrics.authEvents),
    rateLimit(deps.rateLimiter, deps.tokenCache, deps.metrics.authEvents, {
      rejected: () => deps.metrics.rateLimitRejections.inc(),
    }),
    jsonBody,
    api,
  );

  app.use(notFound);
  app.use(errorMiddleware(deps.logger));
  return app;
}
