export * from './logger';
export * from './metrics-server';
export * from './lifecycle';
export * from './periodic-task';
export * from './redis';
export * from './service-metrics';
export { Registry, Counter, Gauge, Histogram, collectDefaultMetrics } from 'prom-client';
