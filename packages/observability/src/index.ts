// @svc/observability: logging and metrics. One line per module of src/.
export * from './logger';
export * from './service-metrics';
export { Registry, Counter, Gauge, Histogram, collectDefaultMetrics } from 'prom-client';
