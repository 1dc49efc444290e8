import { chaosScenario } from './harness';
import { redisNow, redisWork } from './redis-work';

// Redis dies (SIGKILL) and comes back 2 s later from its append-only file (fsync everysec, as
// docker-compose.yml runs it): queued and in-flight jobs are all still there. The kill must find
// work in Redis and cost answers, and the server that comes back must be a new process that still
// holds what was synced before the kill.
chaosScenario('Redis killed and restarted with its append-only file', { redisAppendonly: true }, async (h) => {
  await h.untilEvents(400);
  const answers = h.answers();
  const before = await redisWork(h);
  await h.redis.kill();
  await h.sleep(2000);
  await h.redis.start();
  const after = await redisNow(h, before.completed);
  h.effect('Redis came back as a new server process', () => (after.runId !== before.runId ? 1 : 0));
  h.effect('jobs waiting, running or delayed in Redis when it was killed', () => before.unfinished);
  h.effect('jobs completed before the kill found again after the restart', () => after.found);
  h.effect('requests answered 5xx or not at all from the kill on', () => {
    const now = h.answers();
    return now.status5xx - answers.status5xx + now.unanswered - answers.unanswered;
  });
});
