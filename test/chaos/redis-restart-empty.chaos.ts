import { chaosScenario } from './harness';

// Redis dies (SIGKILL) and comes back 2 s later with nothing: every queued and in-flight job is
// gone, and only Postgres knows which work is still owed.
chaosScenario('Redis SIGKILLed and restarted empty', {}, async (h) => {
  await h.untilEvents(400);
  await h.redis.kill();
  h.redis.wipe();
  await h.sleep(2000);
  await h.redis.start();
});
