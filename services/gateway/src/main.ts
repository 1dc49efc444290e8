// The gateway's composition root: settings once (fail fast), then every dependency, then serve.
import { loadDotEnv, runService } from '@svc/platform';
import { loadGatewayConfig } from './config';
import { startGateway } from './gateway';

loadDotEnv();
void runService({ name: 'gateway', loadConfig: loadGatewayConfig, start: startGateway, finishing: 'in-flight requests' });
