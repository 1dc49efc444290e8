// The gateway's composition root: settings once (fail fast), then every dependency, then serve.
import { loadDotEnv } from '@svc/schema';
import { createLogger, runUntilSignal } from '@svc/observability';
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
  await runUntilSignal(logger, () => startGateway(config, { logger }), { finishing: 'in-flight requests' });
}

main().catch((err: unknown) => {
  console.error(`gateway failed to start: ${(err as Error).message}`);
  process.exit(1);
});
