export * from './logger';
export * from './metrics-server';
export { Registry, Counter, Gauge, Histogram, collectDefaultMetrics } from 'prom-client';
