import { createServiceMetrics } from '@svc/observability';
import type { AttemptResult } from '@svc/webhook-sender';

export type QueueState = 'waiting' | 'active' | 'delayed' | 'failed';
export const QUEUE_STATES: readonly QueueState[] = ['waiting', 'active', 'delayed', 'failed'];

/** Job counts by queue name, read on each scrape. */
export type QueueCounts = () => Promise<Record<string, Partial<Record<QueueState, number>>>>;

/** Delayed jobs already due (not yet moved to waiting) by queue name, read on each scrape. */
export type QueueDueCounts = () => Promise<Record<string, number>>;

/** Ages in seconds of the oldest work Postgres says is owed, read on each scrape (indexed). */
export interface BacklogAges {
  oldestOverdueDelivery(): Promise<number>;
  oldestUnfannedEvent(): Promise<number>;
}

/**
 * What the slot gauges read of the send pool, declared here so that metrics depend on no feature:
 * the fair-share limiter (fair-share/webhook-slots.limiter.ts) gives it.
 */
export interface SlotReadings {
  stats(): { held: { healthy: number; degraded: number }; waitingHere: number; deferredAhead: number; degradedWebhooks: number };
  limit(): number;
}

/** `make(key)`, made once per key and kept: label values are few and bounded. */
function boundOnce<K, V>(make: (key: K) => V): (key: K) => V {
  const made = new Map<K, V>();
  return (key) => {
    let value = made.get(key);
    if (value === undefined) made.set(key, (value = make(key)));
    return value;
  };
}

/**
 * Every metric of the dispatcher, on its own registry (tests run several dispatchers in one
 * process). Labels hold bounded values only: event names, outcomes, attempt results, queue states.
 */
export function createDispatcherMetrics(sources: { queueCounts?: QueueCounts; dueCounts?: QueueDueCounts; backlog?: BacklogAges; slots?: SlotReadings } = {}) {
  const { queueCounts, dueCounts, backlog, slots } = sources;
  const m = createServiceMetrics('dispatcher');
  const deliveries = m.counter('svc_webhook_deliveries_total', 'Deliveries that ended, by event and outcome (success or failure); counted once per delivery', ['evento', 'outcome']);
  const attempts = m.counter('svc_webhook_attempts_total', 'Delivery attempts, by result (2xx, 3xx, 4xx, 5xx, timeout, network, blocked)', ['result']);
  const attemptDuration = m.histogram('svc_webhook_attempt_duration_seconds', 'Duration of one delivery attempt, from connect to the end of the answer', [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]);
  const eventToDelivery = m.histogram('svc_event_to_delivery_seconds', "Time from the event's commit to the receiver's 2xx", [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]);
  m.gauge('svc_queue_jobs', 'Jobs in the queues, by state (waiting, active, delayed, failed)', ['queue', 'state'], async function () {
    if (!queueCounts) return;
    // Redis away: the gauge keeps its last values and /readyz reports the outage.
    const counts = await queueCounts().catch(() => undefined);
    if (!counts) return;
    for (const [queue, byState] of Object.entries(counts)) {
      for (const state of QUEUE_STATES) this.set({ queue, state }, byState[state] ?? 0);
    }
  });

  // Queue depth for autoscaling (infra/kubernetes' ScaledObject): waiting plus these. A delayed job
  // past its due time is owed now, but `delayed` above counts it with those due later.
  m.gauge('svc_queue_delayed_due_jobs', 'Delayed jobs whose due time has passed, not yet moved to waiting (retries and deferrals owed now), by queue', ['queue'], async function () {
    const counts = await dueCounts?.().catch(() => undefined);
    if (!counts) return;
    for (const [queue, due] of Object.entries(counts)) this.set({ queue }, due);
  });

  const jobsFailed = m.counter('svc_jobs_failed_total', 'Jobs that ended failed for a reason other than a receiver failing 3 attempts, by queue and reason (malformed, retries_exhausted)', ['queue', 'reason']);
  const retentionRemoved = m.counter('svc_retention_removed_total', 'Rows removed past RETENTION_DAYS by the retention, by table (entregas, entrega_intentos, outbox)', ['table']);
  const autoDisabled = m.counter('svc_webhooks_auto_disabled_total', 'Webhooks the platform deactivated, by motivo (FALLAS_CONTINUAS, GONE)', ['motivo']);
  const reconcilerRequeued = m.counter('svc_reconciler_requeued_total', 'Work queued again by the reconciler because Redis no longer held it, by kind (event, delivery)', ['kind']);
  // Postgres away: the gauges keep their last values and /readyz reports the outage.
  m.gauge('svc_oldest_overdue_delivery_seconds', 'How long the most overdue pending delivery has been due (0 when none)', [], async function () {
    const age = await backlog?.oldestOverdueDelivery().catch(() => undefined);
    if (age !== undefined) this.set(age);
  });
  m.gauge('svc_oldest_unfanned_event_seconds', 'Age of the oldest committed event not yet fanned out to its deliveries (0 when none)', [], async function () {
    const age = await backlog?.oldestUnfannedEvent().catch(() => undefined);
    if (age !== undefined) this.set(age);
  });

  m.gauge('svc_delivery_in_flight_limit', 'Sends this dispatcher lets be in flight now: DISPATCHER_CONCURRENCY, or the adaptive limit between it and DISPATCHER_MAX_IN_FLIGHT', [], async function () {
    if (slots) this.set(slots.limit());
  });
  // Held routes (fan-out/fan-out.worker.ts): how often an event's routes came without a read.
  const routes = m.counter('svc_fanout_routes_total', "Events routed by this dispatcher's fan-out, by source: held (routes it held at the event's webhook count or later, no read) or read (webhooks read)", ['source']);

  // Fair sharing (fair-share/webhook-slots.limiter.ts): who is held back, by state, never by webhook
  // (ids and URLs are unbounded; the log names the webhook when it becomes degraded or recovers).
  const deferrals = m.counter('svc_delivery_deferrals_total', "Deliveries put back in the queue until their webhook's turn (no attempt spent), by reason (webhook_limit, company_limit, degraded_limit, pool_reserve)", ['reason']);
  m.gauge('svc_delivery_slots', 'Send slots held in this dispatcher, by the state of the webhook holding them (healthy, degraded)', ['state'], async function () {
    if (!slots) return;
    const { held } = slots.stats();
    this.set({ state: 'healthy' }, held.healthy);
    this.set({ state: 'degraded' }, held.degraded);
  });
  m.gauge('svc_delivery_waiting', "Deliveries waiting for their webhook's turn in this dispatcher: in the process (a few ms) or deferred to the queue (where: here, deferred)", ['where'], async function () {
    if (!slots) return;
    const stats = slots.stats();
    this.set({ where: 'here' }, stats.waitingHere);
    this.set({ where: 'deferred' }, stats.deferredAhead);
  });
  m.gauge('svc_webhooks_degraded', 'Webhooks whose recent attempts failed, held to fewer slots until they recover (this dispatcher)', [], async function () {
    if (slots) this.set(slots.stats().degradedWebhooks);
  });

  // Children bound on first use, by label values: a delivery's counts then hash no label object.
  const attemptsBy = boundOnce((result: AttemptResult) => attempts.labels({ result }));
  const deliveriesBy = boundOnce((evento: string) => boundOnce((outcome: 'success' | 'failure') => deliveries.labels({ evento, outcome })));

  return {
    registry: m.registry,
    deferrals,
    routes,
    jobsFailed,
    reconcilerRequeued,
    retentionRemoved,
    autoDisabled,
    deliveries,
    attempts,
    attemptDuration,
    eventToDelivery,
    attempt(result: AttemptResult, durationMs: number): void {
      attemptsBy(result).inc();
      attemptDuration.observe(durationMs / 1000);
    },
    /** A delivery ended: counted once, by event and outcome. */
    delivered(evento: string, outcome: 'success' | 'failure'): void {
      deliveriesBy(evento)(outcome).inc();
    },
  };
}

export type DispatcherMetrics = ReturnType<typeof createDispatcherMetrics>;
