// PLACEHOLDER until the webhooks work lands: builds the dispatcher's dependencies and workers.
import type { AddressInfo } from 'node:net';
import { createLogger, createMetricsServer, Registry, collectDefaultMetrics, type Logger } from '@svc/observability';
import type { DispatcherConfig } from './config';

export interface RunningDispatcher {
  metricsPort: number;
  stop(): Promise<void>;
}

export async function startDispatcher(config: DispatcherConfig, options: { logger?: Logger } = {}): Promise<RunningDispatcher> {
  const logger = options.logger ?? createLogger('dispatcher', config.logLevel);
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'svc_' });
  const server = createMetricsServer(registry, []);
  await new Promise<void>((resolve) => server.listen(config.metricsPort, resolve));
  const metricsPort = (server.address() as AddressInfo).port;
  logger.info({ metricsPort }, 'dispatcher started');
  return {
    metricsPort,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
