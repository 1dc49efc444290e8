import express, { Router, type Express } from 'express';
import { safeEqual } from './auth/token';
import { adminOnly, authenticate } from './auth/auth.middleware';
import { defaultRateHeaders, rateLimit } from './rate-limit/rate-limit.middleware';
import { portalSessionLimit } from './rate-limit/portal-session.limit';
import { waitingAnswer } from './listen/answer-exemption';
import { jsonBody } from './http/body.middleware';
import { noStore, strictTransport } from './http/cache-control.middleware';
import { requestId } from './http/request-id.middleware';
import { originFormOnly } from './http/origin-form.middleware';
import { accessLog } from './http/access-log.middleware';
import { errorMiddleware, notFound } from './http/error.middleware';
import { mountCompanyRoutes } from './companies/company.routes';
import { mountCompanyInternalRoutes } from './companies/company.internal-routes';
import { mountShipmentRoutes, mountShipmentInternalRoutes } from './shipments/shipment.routes';
import { mountWebhookRoutes, mountWebhookInternalRoutes } from './webhooks/webhook.routes';
import { mountDeliveryRoutes } from './deliveries/delivery.routes';
import { mountEventCatalogRoutes } from './events/event-catalog.routes';
import { mountListenRoutes } from './listen/listen.routes';
import { mountInternalOpenApi, openApiRouter } from './openapi/openapi.routes';
import { mountPortalInternalRoutes } from './portal/portal.internal-routes';
import { mountPortalRoutes } from './portal/portal.routes';
import { portalStatic } from './portal/portal-static';
import type { GatewayDeps } from './deps';

/**
 * Routing is case-sensitive on every router: `/INTERNAL/V1/...` or `/API/V1/...` is no route (404),
 * so a proxy rule in front that matches paths exactly cannot be passed by changing their case.
 * Not strict: a trailing slash still reaches its route, as before.
 */
const ROUTER_OPTIONS = { caseSensitive: true, strict: false } as const;

/** An express app with the gateway's settings and the first layers of every request. */
function baseApp(deps: GatewayDeps): Express {
  const app = express();
  // Before the first `use`: express reads it when it makes the app's router.
  app.set('case sensitive routing', true);
  app.disable('x-powered-by');
  // No ETag: the contract has none, and express would hash every body to make one.
  app.set('etag', false);
  app.set('query parser', 'simple');
  app.use(requestId);
  app.use(accessLog(deps.logger, deps.metrics));
  app.use(originFormOnly);
  return app;
}

/**
 * The operator's door: `/internal/v1` (companies, shipments, webhooks, portal links), behind the
 * admin token and its failure limit.
 */
function mountInternal(app: Express, deps: GatewayDeps): void {
  const internal = Router(ROUTER_OPTIONS);
  mountCompanyInternalRoutes(internal, deps);
  mountShipmentInternalRoutes(internal, deps);
  mountWebhookInternalRoutes(internal, deps);
  mountPortalInternalRoutes(internal, deps);
  mountInternalOpenApi(internal);
  internal.use(notFound);
  // The internal routes keep their guards on the mount: they are no hot path, and a refusal from
  // the guard is then written in the request's own tick (an error leaving a router is written a
  // turn later, which Node loses for a `PRI /path` request line; the parser fuzz sends one).
  const guard = adminOnly({
    token: deps.config.adminToken,
    compare: safeEqual,
    limiter: deps.adminAuthLimiter,
    clientAddress: deps.clientAddress,
    events: deps.metrics.authEvents,
    logger: deps.logger,
  });
  app.use('/internal/v1', noStore, guard, jsonBody, internal);
}

function finish(app: Express, deps: GatewayDeps): Express {
  app.use(notFound);
  app.use(errorMiddleware(deps.logger));
  return app;
}

/**
 * The public listener (PORT). The flow of a request: request id → access log → (internal: admin
 * token | api: rate headers → authentication → rate limit | portal: session cookie → anti-CSRF →
 * session rate limit) → JSON body → route → error envelope. With `internal: false` (ADMIN_PORT set)
 * `/internal/v1` is no route here: it answers 404, as any unknown path, and the admin listener
 * (`createAdminApp`) serves it.
 *
 * `/api/v1` is one mount whose router runs the guards first: a guard inside the router is a layer
 * at `/`, which the router passes without matching or trimming the path again (a layer mounted at
 * `/api/v1` does both, on every request).
 *
 * `/portal/v1` runs the same route handlers as `/api/v1` where a page does what the API does, for
 * the caller its session derives (portal/portal-caller.ts).
 */
export function createApp(deps: GatewayDeps, options: { internal: boolean } = { internal: true }): Express {
  const app = baseApp(deps);
  if (options.internal) mountInternal(app, deps);

  const api = Router(ROUTER_OPTIONS);
  api.use(
    noStore,
    defaultRateHeaders(deps.rateLimiter.limit),
    authenticate(deps.db, deps.tokenCache, deps.metrics.authEvents, { failures: deps.authFailureLimiter, clientAddress: deps.clientAddress }),
    rateLimit(
      deps.rateLimiter,
      deps.tokenCache,
      deps.metrics.authEvents,
      { rejected: () => deps.metrics.rateLimitRejections.inc() },
      waitingAnswer(deps.redis, deps.config.redisPrefix),
    ),
    jsonBody,
  );
  mountCompanyRoutes(api, deps);
  mountShipmentRoutes(api, deps);
  mountWebhookRoutes(api, deps);
  mountDeliveryRoutes(api, deps);
  mountEventCatalogRoutes(api);
  mountListenRoutes(api, deps, deps.listenStreams);
  api.use(notFound);
  app.use('/api/v1', api);

  // The customer portal (docs/portal.md): its API, guarded by the session's cookie, then its built pages.
  if (deps.config.portalBaseUrl?.startsWith('https://')) app.use('/portal', strictTransport);
  app.use('/portal/v1', noStore);
  // Session starts are limited per client address before the route looks the link up.
  app.use('/portal/v1/sesion', portalSessionLimit(deps.portalSessionLimiter, deps.clientAddress, { limited: () => deps.metrics.authEvents.addressLimited('portal_session') }));
  const portalApi = Router(ROUTER_OPTIONS);
  mountPortalRoutes(portalApi, deps, deps.portalRateLimiter);
  portalApi.use(notFound);
  app.use('/portal/v1', portalApi);
  app.use('/portal', portalStatic(deps.config));

  // The API's description, outside /api/v1: the contract asks a bearer token on every /api/v1 route,
  // and a client generator needs the document before it has one. After the two mounts, which it
  // shares no path with, so that their requests do not pass through its router.
  app.use(openApiRouter());

  return finish(app, deps);
}

/** The admin listener (ADMIN_PORT on ADMIN_HOST): `/internal/v1` only; anything else is 404. */
export function createAdminApp(deps: GatewayDeps): Express {
  const app = baseApp(deps);
  mountInternal(app, deps);
  return finish(app, deps);
}
