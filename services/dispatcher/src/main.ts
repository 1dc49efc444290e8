// The dispatcher's composition root: settings once (fail fast), then every dependency, then consume.
import { loadDotEnv } from '@svc/schema';
import { createLogger } from '@svc/observability';
import { loadDispatcherConfig } from './config';
import { startDispatcher } from './dispatcher';

async function main(): Promise<void> {
  loadDotEnv();
  let config;
  try {
    config = loadDispatcherConfig();
  } catch (err) {
    console.error((err as Error).message);
    process.exit(2);
  }
  const logger = createLogger('dispatcher', config.logLevel);
  const dispatcher = await startDispatcher(config, { logger });

  let stopping = false;
  const shutdown = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'stopping: finishing in-flight deliveries');
    dispatcher.stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
}

main().catch((err: unknown) => {
  console.error(`dispatcher failed to start: ${(err as Error).message}`);
  process.exit(1);
});
