import { chaosScenario } from './harness';
import { cutProxyUnderLoad } from './proxy-cut';

// Every service loses Redis for 10 s (through a proxy; the server itself keeps its data): the
// gateway answers 503 or leaves committed events to its outbox sweep, the workers reconnect. The
// cut must close connections the services had open, refuse the ones they try meanwhile, and cost
// answers.
chaosScenario('Redis cut for 10 s for every service', { redisProxy: true }, (h) =>
  cutProxyUnderLoad(h, h.redisProxy, {
    closed: 'connections to Redis the cut closed',
    refused: 'connections to Redis refused during the cut',
  }),
);
