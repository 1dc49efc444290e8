import { createWebhookSlots, type Admission, type Slot, type SlotState } from '../src/deliveries/webhook-slots.limiter';

/** The fair-sharing rules on their own (the dispatcher-level proof is test/chaos/tenant-isolation). */

const slotOf = (a: Admission): Slot => {
  if (!('slot' in a)) throw new Error(`expected a slot, got a deferral (${a.reason})`);
  return a.slot;
};
const deferralOf = (a: Admission): { deferUntil: number; reason: string } => {
  if ('slot' in a) throw new Error('expected a deferral, got a slot');
  return a;
};
const FAIL = { ok: false, durationMs: 5000 };
const OK = { ok: true, durationMs: 5 };

describe('webhook slots', () => {
  it('a webhook never holds more than its bound; the next job waits here and starts when one frees', async () => {
    const slots = createWebhookSlots({ slots: 50, perWebhook: 3 });
    slotOf(await slots.acquire('a')).release(OK); // known now: a fast receiver
    const held = await Promise.all([1, 2, 3].map(async () => slotOf(await slots.acquire('a'))));
    const fourth = slots.acquire('a');
    expect(slots.stats().waitingHere).toBe(1);
    held[0]!.release(OK);
    const started = slotOf(await fourth);
    expect(slots.stats()).toMatchObject({ held: { healthy: 3, degraded: 0 }, waitingHere: 0 });
    for (const s of [started, held[1]!, held[2]!]) s.release(OK);
    expect(slots.stats().held.healthy).toBe(0);
  });

  it('a job that cannot start within the local wait is deferred, not held', async () => {
    const slots = createWebhookSlots({ slots: 50, perWebhook: 1, maxLocalWaitMs: 80 });
    slotOf(await slots.acquire('a')).release(OK);
    const first = slotOf(await slots.acquire('a'));
    const t0 = Date.now();
    const second = deferralOf(await slots.acquire('a'));
    expect(Date.now() - t0).toBeGreaterThanOrEqual(75);
    expect(second.reason).toBe('webhook_limit');
    expect(second.deferUntil).toBeGreaterThan(Date.now());
    first.release(OK);
  });

  it('a webhook whose attempts have not ended yet is deferred at once rather than waiting (it may be dead)', async () => {
    const slots = createWebhookSlots({ slots: 50, perWebhook: 1, maxLocalWaitMs: 10_000 });
    const first = slotOf(await slots.acquire('new'));
    const t0 = Date.now();
    expect(deferralOf(await slots.acquire('new')).reason).toBe('webhook_limit');
    expect(Date.now() - t0).toBeLessThan(20);
    expect(slots.stats().waitingHere).toBe(0);
    first.release(OK);
  });

  it('a webhook already sending leaves a reserve free, so another tenant starts at once', async () => {
    // 20 slots: a reserve of 2. One webhook with a bound of 20 gets 18, then waits.
    const slots = createWebhookSlots({ slots: 20, perWebhook: 20, maxLocalWaitMs: 10 });
    const a: Slot[] = [];
    for (let i = 0; i < 18; i++) a.push(slotOf(await slots.acquire('a')));
    expect(deferralOf(await slots.acquire('a')).reason).toBe('pool_reserve');
    const b = slotOf(await slots.acquire('b'));
    const c = slotOf(await slots.acquire('c'));
    expect(slots.stats().held.healthy).toBe(20);
    for (const s of [...a, b, c]) s.release(OK);
  });

  it('failing attempts degrade a webhook to a quarter of its bound, and successes bring it back', async () => {
    const changes: Array<[string, SlotState]> = [];
    const slots = createWebhookSlots({ slots: 50, perWebhook: 8, onStateChange: (id, state) => changes.push([id, state]) });
    // One failure is not enough (a receiver may fail once); two in a row are.
    slotOf(await slots.acquire('dead')).release(FAIL);
    expect(slots.stats().degradedWebhooks).toBe(0);
    slotOf(await slots.acquire('dead')).release(FAIL);
    expect(changes).toEqual([['dead', 'degraded']]);
    expect(slots.stats().degradedWebhooks).toBe(1);

    // Degraded: 8 / 4 = 2 slots, and a third job is deferred at once, by the attempts' length.
    const held = [slotOf(await slots.acquire('dead')), slotOf(await slots.acquire('dead'))];
    expect(slots.stats().held).toEqual({ healthy: 0, degraded: 2 });
    const t0 = Date.now();
    const deferred = deferralOf(await slots.acquire('dead'));
    expect(Date.now() - t0).toBeLessThan(20);
    expect(deferred.reason).toBe('degraded_limit');
    expect(deferred.deferUntil - t0).toBeGreaterThanOrEqual(1000);
    // The next one queues behind it: its turn is later.
    const later = deferralOf(await slots.acquire('dead'));
    expect(later.deferUntil).toBeGreaterThan(deferred.deferUntil - 2000);
    expect(slots.stats().deferredAhead).toBe(2);

    for (const s of held) s.release(OK);
    for (let i = 0; i < 10 && slots.stats().degradedWebhooks > 0; i++) slotOf(await slots.acquire('dead')).release(OK);
    expect(changes).toEqual([
      ['dead', 'degraded'],
      ['dead', 'healthy'],
    ]);
    // Recovered: the full bound again, and its deferred backlog no longer counts against it.
    const full = await Promise.all(Array.from({ length: 8 }, async () => slotOf(await slots.acquire('dead'))));
    expect(slots.stats().held.healthy).toBe(8);
    for (const s of full) s.release(OK);
  });

  it('degraded webhooks together hold at most half the pool; healthy ones keep the rest', async () => {
    const slots = createWebhookSlots({ slots: 10, perWebhook: 8, maxLocalWaitMs: 10 });
    const dead = ['d1', 'd2', 'd3', 'd4', 'd5', 'd6', 'd7'];
    for (const id of dead) for (let i = 0; i < 2; i++) slotOf(await slots.acquire(id)).release(FAIL);
    expect(slots.stats().degradedWebhooks).toBe(7);
    // Each degraded webhook may hold 2 (8 / 4), but together only 5 (10 / 2).
    const held: Slot[] = [];
    for (const id of dead) {
      const a = await slots.acquire(id);
      if ('slot' in a) held.push(a.slot);
      else expect(a.reason).toBe('degraded_limit');
    }
    expect(held).toHaveLength(5);
    const healthy = await Promise.all(['h1', 'h2', 'h3', 'h4'].map(async (id) => slotOf(await slots.acquire(id))));
    expect(slots.stats().held).toEqual({ healthy: 4, degraded: 5 });
    for (const s of [...held, ...healthy]) s.release(OK);
  });

  it('close sends every waiter away deferred', async () => {
    const slots = createWebhookSlots({ slots: 50, perWebhook: 1, maxLocalWaitMs: 10_000 });
    slotOf(await slots.acquire('a')).release(OK);
    const first = slotOf(await slots.acquire('a'));
    const waiting = slots.acquire('a');
    expect(slots.stats().waitingHere).toBe(1);
    slots.close();
    expect(deferralOf(await waiting).deferUntil).toBeGreaterThan(0);
    first.release(OK);
  });
});
