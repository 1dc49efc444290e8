import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from '@svc/observability';
import type { AuthEvents } from '../auth/auth-events';

/** Every metric of the gateway, on its own registry (tests build several apps in one process). */
export function createGatewayMetrics(outboxStats?: () => Promise<{ pending: number; oldestAgeSeconds: number }>) {
  const registry = new Registry();
  registry.setDefaultLabels({ service: 'gateway' });
  collectDefaultMetrics({ register: registry, prefix: 'svc_' });

  const httpRequests = new Counter({
    name: 'svc_http_requests_total',
    help: 'HTTP requests answered, by route template',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [registry],
  });
  const httpDuration = new Histogram({
    name: 'svc_http_request_duration_seconds',
    help: 'HTTP request duration, by route template',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [registry],
  });
  const rateLimitRejections = new Counter({
    name: 'svc_rate_limit_rejections_total',
    help: 'Requests refused with 429 RATE_LIMIT_EXCEEDED',
    registers: [registry],
  });
  const quotaRefusals = new Counter({
    name: 'svc_shipment_refusals_total',
    help: 'Shipment creations refused by the daily limit or the credits',
    labelNames: ['reason'] as const,
    registers: [registry],
  });
  const authFailures = new Counter({
    name: 'svc_auth_failures_total',
    help: 'Requests refused with 401 AUTH_REQUIRED, by reason',
    labelNames: ['reason'] as const,
    registers: [registry],
  });
  const tokenCache = new Counter({
    name: 'svc_token_cache_lookups_total',
    help: 'Token cache lookups, by result (hit or miss)',
    labelNames: ['result'] as const,
    registers: [registry],
  });
  const outboxWritten = new Counter({
    name: 'svc_outbox_events_written_total',
    help: 'Shipment events written to the outbox',
    labelNames: ['evento'] as const,
    registers: [registry],
  });
  const outboxRelayed = new Counter({
    name: 'svc_outbox_events_relayed_total',
    help: 'Outbox events added to the queue, by path (relay or sweep)',
    labelNames: ['path'] as const,
    registers: [registry],
  });
  const shipmentsCreated = new Counter({
    name: 'svc_shipments_created_total',
    help: 'Shipments created, by mode',
    labelNames: ['modo'] as const,
    registers: [registry],
  });
  let stats: { pending: number; oldestAgeSeconds: number } | undefined;
  // Both outbox gauges read one query per scrape: the first collect starts it, the second awaits it.
  let refreshing: { at: number; done: Promise<void> } | undefined;
  const refreshStats = (): Promise<void> => {
    if (!outboxStats) return Promise.resolve();
    if (refreshing && Date.now() - refreshing.at < 1000) return refreshing.done;
    const done = outboxStats().then(
      (s) => {
        stats = s;
      },
      () => undefined,
    );
    refreshing = { at: Date.now(), done };
    return done;
  };
  new Gauge({
    name: 'svc_outbox_pending',
    help: 'Outbox events committed but not yet added to the queue',
    registers: [registry],
    async collect() {
      await refreshStats();
      if (stats) this.set(stats.pending);
    },
  });
  new Gauge({
    name: 'svc_outbox_oldest_pending_age_seconds',
    help: 'Age of the oldest outbox event not yet added to the queue (0 when none)',
    registers: [registry],
    async collect() {
      await refreshStats();
      if (stats) this.set(stats.oldestAgeSeconds);
    },
  });

  const authEvents: AuthEvents = {
    failure: (reason) => authFailures.inc({ reason }),
    cache: (result) => tokenCache.inc({ result }),
  };

  return {
    registry,
    httpRequests,
    httpDuration,
    rateLimitRejections,
    quotaRefusals,
    authFailures,
    tokenCache,
    outboxWritten,
    outboxRelayed,
    shipmentsCreated,
    authEvents,
  };
}

export type GatewayMetrics = ReturnType<typeof createGatewayMetrics>;
