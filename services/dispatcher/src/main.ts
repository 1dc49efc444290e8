// The dispatcher's composition root: settings once (fail fast), then every dependency, then consume.
import { loadDotEnv } from '@svc/schema';
import { createLogger, runUntilSignal } from '@svc/observability';
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
  await runUntilSignal(logger, () => startDispatcher(config, { logger }), { finishing: 'in-flight deliveries' });
}

main().catch((err: unknown) => {
  console.error(`dispatcher failed to start: ${(err as Error).message}`);
  process.exit(1);
});
