import { chaosScenario } from './harness';

// Deliveries are in flight on both dispatchers when one dies; its jobs move to the other once their
// locks expire, and it is back (a new process) before the next kill.
chaosScenario('a dispatcher SIGKILLed twice', {}, async (h) => {
  for (const events of [300, 800]) {
    await h.untilEvents(events);
    await h.dispatchers[0]!.kill('SIGKILL');
    await h.dispatchers[0]!.start();
  }
});
