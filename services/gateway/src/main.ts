// The gateway's composition root: settings once (fail fast), then every dependency, then serve.
import { loadDotEnv } from '@svc/schema';
import { createLogger } from '@svc/observability';
import { loadGatewayConfig } from './config';
import { startGateway } from './gateway';

async function main(): Promise<void> {
  loadDotEnv();
  let config;
  try {
    config = loadGatewayConfig();
  } catch (err) {
    console.error((err as Error).message);
    process.exit(2);
  }
  const logger = createLogger('gateway', config.logLevel);
  const gateway = await startGateway(config, { logger });

  let stopping = false;
  const shutdown = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'stopping: finishing in-flight requests');
    gateway.stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
}

main().catch((err: unknown) => {
  console.error(`gateway failed to start: ${(err as Error).message}`);
  process.exit(1);
});
