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
import { mountDeliveryRoutes } from './deliveries/delivery.routes';
import { openApiRouter } from './openapi/openapi.routes';
import { mountPortalInternalRoutes } from './portal/portal.internal-routes';
import { mountPortalRoutes } from './portal/portal.routes';
import { portalStatic } from './portal/portal-static';
import type { GatewayDeps } from './deps';

/**
 * The flow of a request: request id → access log → (internal: admin token | api: rate headers →
 * authentication → rate limit | portal: session cookie → anti-CSRF → session rate limit) → JSON body
 * → route → error envelope.
 *
 * `/api/v1` is one mount whose router runs the guards first: a guard inside the router is a layer
 * at `/`, which the router passes without matching or trimming the path again (five layers mounted
 * at `/api/v1` each did both; -4% of the gateway's CPU per read, paired in-process rounds).
 */
export function createApp(deps: GatewayDeps): Express {
  const app = express();
  app.disable('x-powered-by');
  // No ETag: the contract has none, and express would hash every body to make one.
  app.set('etag', false);
  app.set('query parser', 'simple');

  app.use(requestId);
  app.use(accessLog(deps.logger, deps.metrics));

  const internal = Router({ strict: false });
  mountCompanyInternalRoutes(internal, deps);
  mountShipmentInternalRoutes(internal, deps);
  mountWebhookInternalRoutes(internal, deps);
  mountPortalInternalRoutes(internal, deps);
  internal.use(notFound);
  // The internal routes keep their guards on the mount: they are no hot path, and a refusal from
  // the guard is then written in the request's own tick (an error leaving a router is written a
  // turn later, which Node loses for a `PRI /path` request line; the parser fuzz sends one).
  app.use('/internal/v1', adminOnly(deps.config.adminToken, safeEqual), jsonBody, internal);

  const api = Router({ strict: false });
  api.use(
    defaultRateHeaders(deps.rateLimiter.limit),
    authenticate(deps.db, deps.tokenCache, deps.metrics.authEvents),
    rateLimit(deps.rateLimiter, deps.tokenCache, deps.metrics.authEvents, {
      rejected: () => deps.metrics.rateLimitRejections.inc(),
    }),
    jsonBody,
  );
  mountCompanyRoutes(api, deps);
  mountShipmentRoutes(api, deps);
  mountWebhookRoutes(api, deps);
  mountDeliveryRoutes(api, deps);
  api.use(notFound);
  app.use('/api/v1', api);

  // The customer portal (portal.md): its API, guarded by the session's cookie, then its built pages.
  const portalApi = Router({ strict: false });
  mountPortalRoutes(portalApi, deps, deps.portalRateLimiter);
  portalApi.use(notFound);
  app.use('/portal/v1', portalApi);
  app.use('/portal', portalStatic(deps.config));

  // The API's description, outside /api/v1: the contract asks a bearer token on every /api/v1 route,
  // and a client generator needs the document before it has one. After the two mounts, which it
  // shares no path with, so that their requests do not pass through its router.
  app.use(openApiRouter());

  app.use(notFound);
  app.use(errorMiddleware(deps.logger));
  return app;
}
