import type { Logger } from '@svc/observability';
import { loadDispatcherConfig, type DispatcherConfig } from '../../services/dispatcher/src/config';
import { startDispatcher, type RunningDispatcher } from '../../services/dispatcher/src/dispatcher';
import { TEST_REDIS_URL } from './env';
import { captureLogs } from './log-capture';

export interface TestDispatcher extends RunningDispatcher {
  config: DispatcherConfig;
  logs: { lines: string[]; text(): string };
}

/**
 * The very same dispatcher main.ts starts, in this process, on an ephemeral metrics port, against
 * a test database and Redis prefix. Delivers to the loopback receiver (`receiver.test`) unless
 * `env` says otherwise.
 */
export async function startTestDispatcher(opts: {
  databaseUrl: string;
  redisPrefix: string;
  env?: Record<string, string>;
  logger?: Logger;
}): Promise<TestDispatcher> {
  const config = loadDispatcherConfig({
    DATABASE_URL: opts.databaseUrl,
    REDIS_URL: TEST_REDIS_URL,
    REDIS_PREFIX: opts.redisPrefix,
    DISPATCHER_METRICS_PORT: '0',
    DISPATCH_HOST_MAP: 'receiver.test=127.0.0.1,other.test=127.0.0.1',
    DISPATCH_ALLOW_CIDRS: '127.0.0.0/8',
    DB_POOL_SIZE: '5',
    DISPATCHER_CONCURRENCY: '20',
    ...opts.env,
  });
  const capture = captureLogs('dispatcher');
  const running = await startDispatcher(config, { logger: opts.logger ?? capture.logger });
  return { ...running, config, logs: capture };
}
