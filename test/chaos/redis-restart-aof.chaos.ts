import { chaosScenario } from './harness';

// Redis dies (SIGKILL) and comes back 2 s later from its append-only file (fsync everysec, as
// docker-compose.yml runs it): queued and in-flight jobs are all still there.
chaosScenario('Redis killed and restarted with its append-only file', { redisAppendonly: true }, async (h) => {
  await h.untilEvents(400);
  await h.redis.kill();
  await h.sleep(2000);
  await h.redis.start();
});
