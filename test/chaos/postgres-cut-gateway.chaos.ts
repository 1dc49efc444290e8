import { chaosScenario } from './harness';
import { cutProxyUnderLoad } from './proxy-cut';

// The gateway loses Postgres for 10 s: creations answer 503 meanwhile (events it committed are owed
// whether or not their answer came back), and nothing committed before or after may be lost. The
// cut must close connections the gateway had open, refuse the ones it tries meanwhile, and cost
// answers.
chaosScenario('Postgres cut for 10 s for the gateway', { postgresProxyFor: 'gateway' }, (h) =>
  cutProxyUnderLoad(h, h.postgresProxy, {
    closed: 'gateway connections to Postgres the cut closed',
    refused: 'gateway connections refused during the cut',
  }),
);
