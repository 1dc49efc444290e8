import { chaosScenario } from './harness';

// The gateway loses Postgres for 10 s: creations answer 503 meanwhile (events it committed are owed
// whether or not their answer came back), and nothing committed before or after may be lost. The
// cut must close connections the gateway had open, refuse the ones it tries meanwhile, and cost
// answers.
chaosScenario('Postgres cut for 10 s for the gateway', { postgresProxyFor: 'gateway' }, async (h) => {
  await h.untilEvents(300);
  const proxy = h.postgresProxy;
  const before = { ...proxy.stats, ...h.answers() };
  proxy.cut();
  const closed = proxy.stats.dropped - before.dropped;
  await h.sleep(10_000);
  const refused = proxy.stats.refused - before.refused;
  proxy.restore();
  h.effect('gateway connections to Postgres the cut closed', () => closed);
  h.effect('gateway connections refused during the cut', () => refused);
  h.effect('requests answered 5xx or not at all from the cut on', () => {
    const now = h.answers();
    return now.status5xx - before.status5xx + now.unanswered - before.unanswered;
  });
});
