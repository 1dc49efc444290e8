import { loadSettings, type CommonSettings } from '@svc/schema';

/**
 * Every setting of the dispatcher, parsed once at start (operations.md, "Start and settings"): the
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
}

export function loadDispatcherConfig(env: Record<string, string | undefined> = process.env): DispatcherConfig {
  return loadSettings('dispatcher', env, (r) => ({
    metricsPort: r.int('DISPATCHER_METRICS_PORT', 9102, 0, 65535),
    concurrency: r.int('DISPATCHER_CONCURRENCY', 50, 1, 10_000),
    lockDurationMs: r.int('DISPATCHER_LOCK_DURATION_MS', 30_000, 1000, 600_000),
  }));
}
