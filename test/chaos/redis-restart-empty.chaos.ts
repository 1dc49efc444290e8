import { chaosScenario } from './harness';
import { redisNow, redisWork } from './redis-work';

// Redis dies (SIGKILL) and comes back 2 s later with nothing: every queued and in-flight job is
// gone, and only Postgres knows which work is still owed. The kill must find work in Redis and cost
// answers, the server that comes back must have lost what it held, and the reconciler must have
// queued lost work again from Postgres.
chaosScenario('Redis SIGKILLed and restarted empty', {}, async (h) => {
  await h.untilEvents(400);
  const requeued = h.countDispatcherLines('queued again');
  const answers = h.answers();
  const before = await redisWork(h);
  await h.redis.kill();
  h.redis.wipe();
  await h.sleep(2000);
  await h.redis.start();
  const after = await redisNow(h, before.completed);
  h.effect('Redis came back as a new server process', () => (after.runId !== before.runId ? 1 : 0));
  h.effect('jobs waiting, running or delayed in Redis when it was killed', () => before.unfinished);
  h.effect('jobs completed before the kill missing after the restart', () => before.completed.length - after.found);
  h.effect("reconciler passes that queued lost work again (the dispatchers' log)", requeued);
  h.effect('requests answered 5xx or not at all from the kill on', () => {
    const now = h.answers();
    return now.status5xx - answers.status5xx + now.unanswered - answers.unanswered;
  });
});
