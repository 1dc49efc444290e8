// The dispatcher's composition root: settings once (fail fast), then every dependency, then consume.
import { loadDotEnv, runService } from '@svc/platform';
import { loadDispatcherConfig } from './config';
import { startDispatcher } from './dispatcher';

loadDotEnv();
void runService({ name: 'dispatcher', loadConfig: loadDispatcherConfig, start: startDispatcher, finishing: 'in-flight deliveries' });
