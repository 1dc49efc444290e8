import type { ReceivedRequest } from '../support/https-receiver';
import { chaosScenario } from './harness';

// Deliveries are in flight on both dispatchers when one dies; its jobs move to the other once their
// locks expire, and it is back (a new process) before the next kill. Each kill comes while the
// receiver holds requests of that dispatcher (told apart by their connections' ports): the answers
// it was about to accept never reach the dead process, so those deliveries must be sent again.
chaosScenario('a dispatcher SIGKILLed twice', {}, async (h) => {
  for (const [i, events] of [300, 800].entries()) {
    await h.untilEvents(events);
    const d = h.dispatchers[0]!;
    // Killed as soon as the check finds them (reading /proc takes a while on a busy machine).
    let inHand: ReceivedRequest[] = [];
    await h.until(`${d.name} with a request the receiver is about to accept`, () => (inHand = h.inHandFrom(d)).length > 0);
    await d.kill('SIGKILL');
    await d.start();
    h.effect(`its requests the receiver was about to accept at kill ${i + 1}`, () => inHand.length);
    h.effect(`of those, sent again after kill ${i + 1}`, () => h.sentAgain(inHand));
  }
});
