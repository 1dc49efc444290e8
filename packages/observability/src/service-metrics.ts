import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/**
 * How often the event loop's lag is sampled (`svc_nodejs_eventloop_lag_*`). prom-client's default,
 * 10 ms, woke an idle process 100 times a second, and a wake-up is dear on a VM (about 0.1 ms of CPU
 * here): an idle dispatcher used 6-8 ms of CPU per second, 2-3 ms at 50 ms (bench/README.md, issue
 * 16). 50 ms still gives 300 samples per 15-s scrape for the lag's p99.
 */
const EVENT_LOOP_SAMPLE_MS = 50;

/**
 * A service's metrics: a registry of its own (tests run several services in one process), `service`
 * on every series, Node's default process metrics under `svc_`, and constructors that register on
 * it. Label names are the only labels a metric takes, and they hold bounded values only.
 */
export function createServiceMetrics(service: string) {
  const registry = new Registry();
  registry.setDefaultLabels({ service });
  collectDefaultMetrics({ register: registry, prefix: 'svc_', eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
  const registers = [registry];
  return {
    registry,
    counter<L extends string = never>(name: string, help: string, labelNames: readonly L[] = []): Counter<L> {
      return new Counter<L>({ name, help, labelNames, registers });
    },
    histogram<L extends string = never>(name: string, help: string, buckets: number[], labelNames: readonly L[] = []): Histogram<L> {
      return new Histogram<L>({ name, help, buckets, labelNames, registers });
    },
    /** `collect` runs on each scrape and sets the values (`this` is the gauge). */
    gauge<L extends string = never>(name: string, help: string, labelNames: readonly L[], collect: (this: Gauge<L>) => Promise<void>): Gauge<L> {
      return new Gauge<L>({ name, help, labelNames, registers, collect });
    },
  };
}
