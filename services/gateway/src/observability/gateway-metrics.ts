import { createServiceMetrics } from '@svc/observability';
import type { AuthEvents } from '../auth/auth-events';

/** The two outbox gauges of one scrape share one query: a reading younger than this is reused. */
const OUTBOX_STATS_MAX_AGE_MS = 1000;

/** Every metric of the gateway, on its own registry (tests build several apps in one process). */
export function createGatewayMetrics(outboxStats?: () => Promise<{ pending: number; oldestAgeSeconds: number }>) {
  const m = createServiceMetrics('gateway');
  const httpRequests = m.counter('svc_http_requests_total', 'HTTP requests answered, by route template', ['method', 'route', 'status']);
  const httpDuration = m.histogram('svc_http_request_duration_seconds', 'HTTP request duration, by route template', [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5], ['method', 'route', 'status']);
  const rateLimitRejections = m.counter('svc_rate_limit_rejections_total', 'Requests refused with 429 RATE_LIMIT_EXCEEDED');
  const quotaRefusals = m.counter('svc_shipment_refusals_total', 'Shipment creations refused by the daily limit or the credits', ['reason']);
  const authFailures = m.counter('svc_auth_failures_total', 'Requests refused with 401 AUTH_REQUIRED, by reason', ['reason']);
  const adminAuthFailures = m.counter('svc_admin_auth_failures_total', 'Requests to /internal/v1 refused for their admin token, by reason (wrong, limited: past the address limit, missing, scheme, malformed)', ['reason']);
  const addressLimited = m.counter('svc_address_limit_refusals_total', 'Requests refused with 429 by a per-client-address limit, by door (api: failed authentications, portal_session)', ['door']);
  const tokenCache = m.counter('svc_token_cache_lookups_total', 'Token cache lookups, by result (hit or miss)', ['result']);
  const outboxWritten = m.counter('svc_outbox_events_written_total', 'Shipment events written to the outbox', ['evento']);
  const outboxRelayed = m.counter('svc_outbox_events_relayed_total', 'Outbox events added to the queue, by path (relay or sweep)', ['path']);
  const shipmentsCreated = m.counter('svc_shipments_created_total', 'Shipments created, by mode', ['modo']);
  let stats: { pending: number; oldestAgeSeconds: number } | undefined;
  let refreshing: { at: number; done: Promise<void> } | undefined;
  const refreshStats = (): Promise<void> => {
    if (!outboxStats) return Promise.resolve();
    if (refreshing && Date.now() - refreshing.at < OUTBOX_STATS_MAX_AGE_MS) return refreshing.done;
    const done = outboxStats().then(
      (s) => {
        stats = s;
      },
      () => undefined,
    );
    refreshing = { at: Date.now(), done };
    return done;
  };
  m.gauge('svc_outbox_pending', 'Outbox events committed but not yet added to the queue', [], async function () {
    await refreshStats();
    if (stats) this.set(stats.pending);
  });
  m.gauge('svc_outbox_oldest_pending_age_seconds', 'Age of the oldest outbox event not yet added to the queue (0 when none)', [], async function () {
    await refreshStats();
    if (stats) this.set(stats.oldestAgeSeconds);
  });

  const authEvents: AuthEvents = {
    failure: (reason) => authFailures.inc({ reason }),
    cache: (result) => tokenCache.inc({ result }),
    adminFailure: (reason) => adminAuthFailures.inc({ reason }),
    addressLimited: (door) => addressLimited.inc({ door }),
  };

  return {
    registry: m.registry,
    httpRequests,
    httpDuration,
    rateLimitRejections,
    quotaRefusals,
    authFailures,
    adminAuthFailures,
    addressLimited,
    tokenCache,
    outboxWritten,
    outboxRelayed,
    shipmentsCreated,
    authEvents,
  };
}

export type GatewayMetrics = ReturnType<typeof createGatewayMetrics>;
