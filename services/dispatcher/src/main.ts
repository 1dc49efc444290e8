// The dispatcher's composition root: settings once (fail fast), then every dependency, then consume.
import { loadDotEnv } from '@svc/schema';
import { runService } from '@svc/observability';
import { loadDispatcherConfig } from './config';
import { startDispatcher } from './dispatcher';

loadDotEnv();
void runService({ name: 'dispatcher', loadConfig: loadDispatcherConfig, start: startDispatcher, finishing: 'in-flight deliveries' });
