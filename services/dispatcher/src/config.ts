import { loadSettings, type CommonSettings } from '@svc/schema';

/**
 * Every setting of the dispatcher, parsed once at start from the environment (and `.env`): the
 * common ones (@svc/schema's `CommonSettings`) and these.
 */
export interface DispatcherConfig extends CommonSettings {
  /** DISPATCHER_METRICS_PORT: `/metrics`, `/healthz`, `/readyz`. Default 9102. */
  metricsPort: number;
  /** DISPATCHER_CONCURRENCY: deliveries in flight in this process. Default 50. */
  concurrency: number;
  /**
   * DISPATCHER_LOCK_DURATION_MS: how long a job stays locked to this process without renewal; a
   * dead process's jobs move on after it. Default 30000.
   */
  lockDurationMs: number;
  /** RECONCILE_INTERVAL_MS: how often the reconciler looks for work Redis lost. Default 10000. */
  reconcileIntervalMs: number;
  /**
   * RECONCILE_GRACE_MS: how late an event's fan-out or a delivery's next attempt must be before
   * the reconciler queues it again. Default 30000: well past a normal queue wait, so it seldom
   * second-guesses work that is merely queued.
   */
  reconcileGraceMs: number;
}

export function loadDispatcherConfig(env: Record<string, string | undefined> = process.env): DispatcherConfig {
  return loadSettings('dispatcher', env, (r) => ({
    metricsPort: r.int('DISPATCHER_METRICS_PORT', 9102, 0, 65535),
    concurrency: r.int('DISPATCHER_CONCURRENCY', 50, 1, 10_000),
    lockDurationMs: r.int('DISPATCHER_LOCK_DURATION_MS', 30_000, 1000, 600_000),
    reconcileIntervalMs: r.int('RECONCILE_INTERVAL_MS', 10_000, 100, 3_600_000),
    reconcileGraceMs: r.int('RECONCILE_GRACE_MS', 30_000, 100, 86_400_000),
  }));
}
