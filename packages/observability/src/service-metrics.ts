import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/**
 * A service's metrics: a registry of its own (tests run several services in one process), `service`
 * on every series, Node's default process metrics under `svc_`, and constructors that register on
 * it. Label names are the only labels a metric takes, and they hold bounded values only.
 */
export function createServiceMetrics(service: string) {
  const registry = new Registry();
  registry.setDefaultLabels({ service });
  collectDefaultMetrics({ register: registry, prefix: 'svc_' });
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
