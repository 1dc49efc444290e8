import { chaosScenario } from './harness';

// The gateway loses Postgres for 10 s: creations answer 503 meanwhile (counted, not expected), and
// nothing answered 201 before or after may be lost.
chaosScenario('Postgres cut for 10 s for the gateway', { postgresProxyFor: 'gateway' }, async (h) => {
  await h.untilEvents(300);
  h.postgresProxy.cut();
  await h.sleep(10_000);
  h.postgresProxy.restore();
});
