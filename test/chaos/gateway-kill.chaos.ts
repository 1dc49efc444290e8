import { chaosScenario } from './harness';

// Creations are in flight when the gateway dies: what it answered 201 must be delivered (committed
// outbox rows left unrelayed are swept by the new process); what got no answer is not expected.
chaosScenario('the gateway SIGKILLed during creations', {}, async (h) => {
  await h.untilEvents(400);
  await h.gateway.kill('SIGKILL');
  await h.gateway.start();
});
