import { chaosScenario } from './harness';

// Every service loses Redis for 10 s (through a proxy; the server itself keeps its data): the
// gateway answers 503 or leaves committed events to its outbox sweep, the workers reconnect. The
// cut must close connections the services had open, refuse the ones they try meanwhile, and cost
// answers.
chaosScenario('Redis cut for 10 s for every service', { redisProxy: true }, async (h) => {
  await h.untilEvents(300);
  const proxy = h.redisProxy;
  const before = { ...proxy.stats, ...h.answers() };
  proxy.cut();
  const closed = proxy.stats.dropped - before.dropped;
  await h.sleep(10_000);
  const refused = proxy.stats.refused - before.refused;
  proxy.restore();
  h.effect('connections to Redis the cut closed', () => closed);
  h.effect('connections to Redis refused during the cut', () => refused);
  h.effect('requests answered 5xx or not at all from the cut on', () => {
    const now = h.answers();
    return now.status5xx - before.status5xx + now.unanswered - before.unanswered;
  });
});
