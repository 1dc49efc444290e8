import { chaosScenario } from './harness';

// Creations are in flight when the gateway dies: every event it committed must be delivered, answered
// or not (committed outbox rows left unrelayed are swept by the new process). The kill comes while
// the stream has requests at the gateway, and must leave requests unanswered.
chaosScenario('the gateway SIGKILLed during creations', {}, async (h) => {
  await h.untilEvents(400);
  await h.until('requests in flight at the gateway', () => h.requestsInFlight() > 0);
  const inFlight = h.requestsInFlight();
  const before = h.answers().unanswered;
  await h.gateway.kill('SIGKILL');
  await h.gateway.start();
  h.effect('requests in flight at the gateway when it was killed', () => inFlight);
  h.effect('requests never answered from the kill on', () => h.answers().unanswered - before);
});
