import { QUEUED_BOUND } from './reconcile/deferral.scheduler';
import { loadSettings, parseShardList, type CommonSettings } from '@svc/platform';

/**
 * Every setting of the dispatcher, parsed once at start from the environment (and `.env`): the
 * common ones (@svc/platform's `CommonSettings`) and these.
 */
export interface DispatcherConfig extends CommonSettings {
  /** DISPATCHER_METRICS_PORT: `/metrics`, `/healthz`, `/readyz`. Default 9102. */
  metricsPort: number;
  /**
   * DISPATCHER_CONCURRENCY: deliveries in flight in this process. Set, exactly that bound. Unset,
   * 50 at start and the floor of an adaptive limit (concurrency/in-flight.governor.ts) that grows
   * while sends wait on slow receivers and the CPU is idle, up to `maxInFlight`.
   */
  concurrency: number;
  /**
   * DISPATCHER_MAX_IN_FLIGHT: the most deliveries in flight the adaptive limit may reach; it bounds
   * the memory the sends take. Default 2000 while DISPATCHER_CONCURRENCY is unset; with
   * DISPATCHER_CONCURRENCY set, that value (no adaptation) unless this is set too.
   */
  maxInFlight: number;
  /**
   * DISPATCHER_WEBHOOK_CONCURRENCY: deliveries in flight for one webhook in this process (a
   * degraded webhook gets a quarter of it). Unset: half of the limit (undefined while the limit
   * adapts: half of it whatever its size now), so one webhook never holds the whole pool.
   */
  webhookConcurrency: number | undefined;
  /**
   * DISPATCHER_COMPANY_CONCURRENCY: deliveries in flight for all of one company's webhooks in this
   * process (its degraded webhooks share half the pool equally with other companies' degraded ones).
   * Unset: half of the limit, as the webhook's, so one company, however many webhooks it has,
   * leaves the others half the pool.
   */
  companyConcurrency: number | undefined;
  /**
   * DISPATCHER_LOCK_DURATION_MS: how long a job stays locked to this process without renewal; a
   * dead process's jobs move on after it. Default 30000.
   */
  lockDurationMs: number;
  /**
   * DISPATCHER_QUEUED_BOUND: waiting and delayed delivery jobs past which the deferral scheduler
   * queues no more deferred work from Postgres (Redis runs noeviction). Default QUEUED_BOUND.
   */
  queuedBound: number;
  /** RECONCILE_INTERVAL_MS: how often the reconciler looks for work Redis lost. Default 10000. */
  reconcileIntervalMs: number;
  /**
   * RECONCILE_GRACE_MS: how late an event's fan-out or a delivery's next attempt must be before
   * the reconciler queues it again. Default 30000: well past a normal queue wait, so it seldom
   * second-guesses work that is merely queued.
   */
  reconcileGraceMs: number;
  /**
   * RETENTION_DAYS: ended deliveries, their attempts, and relayed, fanned-out events (the
   * deliveries' payloads) no delivery names any longer, older than this, are removed in small
   * batches (retention/retention.task.ts). Pending deliveries and events not fanned out stay
   * whatever their age; shipments and their history are never removed. Default 30.
   */
  retentionDays: number;
  /**
   * DISPATCHER_SHARDS: the queue shards this process consumes, `0-3,7` style, each below
   * QUEUE_SHARDS. Default every shard. It still queues to any shard (a company's retries, the
   * reconciler's and the scheduler's work go to the company's shard).
   */
  consumedShards: readonly number[];
}

/** DISPATCHER_CONCURRENCY's default (docs/operations.md): the floor the adaptive limit starts from. */
const DEFAULT_CONCURRENCY = 50;
/**
 * DISPATCHER_MAX_IN_FLIGHT's default: enough sends waiting on 500 ms receivers for 0.8 of the rate
 * to 0 ms ones on the bench machine, within the process's memory bound
 * (docs/decisions/0007-adaptive-in-flight.md).
 */
const DEFAULT_MAX_IN_FLIGHT = 2000;

export function loadDispatcherConfig(env: Record<string, string | undefined> = process.env): DispatcherConfig {
  return loadSettings('dispatcher', env, (r, common) => {
    const fixed = r.optional('DISPATCHER_CONCURRENCY') !== undefined;
    const concurrency = r.int('DISPATCHER_CONCURRENCY', DEFAULT_CONCURRENCY, 1, 10_000);
    const maxInFlight = r.int('DISPATCHER_MAX_IN_FLIGHT', fixed ? concurrency : Math.max(concurrency, DEFAULT_MAX_IN_FLIGHT), concurrency, 10_000);
    const adaptive = maxInFlight > concurrency;
    const shards = parseShardList(r.optional('DISPATCHER_SHARDS'), common.queueShards);
    if (!Array.isArray(shards)) r.check('DISPATCHER_SHARDS', false, shards.problem);
    return {
      metricsPort: r.int('DISPATCHER_METRICS_PORT', 9102, 0, 65535),
      concurrency,
      maxInFlight,
      // A fixed limit gives fixed shares (half of it); an adaptive one, shares that follow it.
      webhookConcurrency: r.optionalInt('DISPATCHER_WEBHOOK_CONCURRENCY', 1, maxInFlight) ?? (adaptive ? undefined : Math.ceil(concurrency / 2)),
      companyConcurrency: r.optionalInt('DISPATCHER_COMPANY_CONCURRENCY', 1, maxInFlight) ?? (adaptive ? undefined : Math.ceil(concurrency / 2)),
      lockDurationMs: r.int('DISPATCHER_LOCK_DURATION_MS', 30_000, 1000, 600_000),
      queuedBound: r.int('DISPATCHER_QUEUED_BOUND', QUEUED_BOUND, 1, 1_000_000),
      reconcileIntervalMs: r.int('RECONCILE_INTERVAL_MS', 10_000, 100, 3_600_000),
      reconcileGraceMs: r.int('RECONCILE_GRACE_MS', 30_000, 100, 86_400_000),
      retentionDays: r.int('RETENTION_DAYS', 30, 1, 36_500),
      consumedShards: Array.isArray(shards) ? shards : [],
    };
  });
}
