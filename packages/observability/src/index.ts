export * from './logger';
export * from './metrics-server';
export * from './lifecycle';
export { Registry, Counter, Gauge, Histogram, collectDefaultMetrics } from 'prom-client';
