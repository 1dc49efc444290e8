// The gateway's composition root: settings once (fail fast), then every dependency, then serve.
import { loadDotEnv } from '@svc/schema';
import { runService } from '@svc/observability';
import { loadGatewayConfig } from './config';
import { startGateway } from './gateway';

loadDotEnv();
void runService({ name: 'gateway', loadConfig: loadGatewayConfig, start: startGateway, finishing: 'in-flight requests' });
