import { chaosScenario } from './harness';

// Every service loses Redis for 10 s (through a proxy; the server itself keeps its data): the
// gateway answers 503 or leaves committed events to its outbox sweep, the workers reconnect.
chaosScenario('Redis cut for 10 s for every service', { redisProxy: true }, async (h) => {
  await h.untilEvents(300);
  h.redisProxy.cut();
  await h.sleep(10_000);
  h.redisProxy.restore();
});
