import { chaosScenario } from './harness';

// The dispatchers lose Postgres for 10 s (the gateway keeps it): fan-outs and attempt records fail
// meanwhile, while the receiver keeps answering.
chaosScenario('Postgres cut for 10 s for the dispatchers', { postgresProxyFor: 'dispatchers' }, async (h) => {
  await h.untilEvents(300);
  h.postgresProxy.cut();
  await h.sleep(10_000);
  h.postgresProxy.restore();
});
