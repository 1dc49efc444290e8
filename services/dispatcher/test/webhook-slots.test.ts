import { createWebhookSlots, type Admission, type Slot, type SlotState, type WebhookSlots } from '../src/fair-share/webhook-slots.limiter';

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
/** A receiver that answers 500 at once. */
const QUICK_FAIL = { ok: false, durationMs: 5 };
const RETRY = { retry: true };

/**
 * A healthy rival under all its shares with a job deferred for about 5 s (a slow receiver's, sent
 * away while a pool shrunk to one slot for a moment held it back): while it waits, every share
 * binds. Alone, a webhook may borrow beyond its shares (see 'work-conserving shares' below).
 */
async function rivalWaiting(slots: WebhookSlots, size: number): Promise<void> {
  slotOf(await slots.acquire('rival', { companyId: 'rival' })).release({ ok: true, durationMs: 4900 });
  slots.resize(1);
  const holder = slots.inFlight() === 0 ? slotOf(await slots.acquire('holder', { companyId: 'holder' })) : undefined;
  const rival = slots.acquire('rival', { companyId: 'rival' });
  slots.close();
  expect(deferralOf(await rival).deferUntil - Date.now()).toBeGreaterThanOrEqual(4000);
  holder?.release(OK);
  slots.resize(size);
}

describe('webhook slots', () => {
  it('a webhook never holds more than its bound; the next job waits here and starts when one frees', async () => {
    // 4 slots: a bound of 3 is also what a webhook alone may borrow (the pool but its headroom, 1).
    const slots = createWebhookSlots({ slots: 4, perWebhook: 3 });
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
    const slots = createWebhookSlots({ slots: 1, perWebhook: 1, maxLocalWaitMs: 80 });
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
    const slots = createWebhookSlots({ slots: 1, perWebhook: 1, maxLocalWaitMs: 10_000 });
    const first = slotOf(await slots.acquire('new'));
    const t0 = Date.now();
    expect(deferralOf(await slots.acquire('new')).reason).toBe('webhook_limit');
    expect(Date.now() - t0).toBeLessThan(20);
    expect(slots.stats().waitingHere).toBe(0);
    first.release(OK);
  });

  it('a webhook already sending leaves a reserve free, so another tenant starts at once', async () => {
    // 20 slots: a reserve of 2. One webhook with a bound of 20 gets 18, then waits.
    const slots = createWebhookSlots({ slots: 20, perWebhook: 20, maxLocalWaitMs: 10, maxPoolWaitMs: 10 });
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
    await rivalWaiting(slots, 50);
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
    expect(slots.stats().deferredAhead).toBe(3);

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
    await rivalWaiting(slots, 10);
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

  describe('a retry (attempt 2 or 3) is not made late by other tenants', () => {
    /** `n` dead endpoints (degraded by two 5 s failures), each then holding one slot. */
    async function deadHolding(slots: ReturnType<typeof createWebhookSlots>, n: number): Promise<Slot[]> {
      const held: Slot[] = [];
      for (let i = 0; i < n; i++) {
        for (let k = 0; k < 2; k++) slotOf(await slots.acquire(`dead-${i}`)).release(FAIL);
        held.push(slotOf(await slots.acquire(`dead-${i}`)));
      }
      return held;
    }

    it('a webhook that fails quickly is not held to the budget dead endpoints fill: its retry starts at once', async () => {
      const slots = createWebhookSlots({ slots: 10, perWebhook: 8 });
      const dead = await deadHolding(slots, 5); // the degraded budget: 10 / 2
      slotOf(await slots.acquire('quick')).release(QUICK_FAIL);
      slotOf(await slots.acquire('quick')).release(QUICK_FAIL);
      expect(slots.stats().degradedWebhooks).toBe(6);

      // Issue 30: its third attempt was deferred again every ~20 ms until a dead attempt ended (5 s).
      const t0 = Date.now();
      const retry = slotOf(await slots.acquire('quick', RETRY));
      expect(Date.now() - t0).toBeLessThan(20);
      expect(slots.stats().held).toEqual({ healthy: 0, degraded: 6 });
      retry.release(QUICK_FAIL);
      // Its slots come back at once, so the budget does not hold its first attempts either.
      slotOf(await slots.acquire('quick')).release(QUICK_FAIL);
      // A dead endpoint still is held to it, first attempt or retry, while another wants a slot.
      await rivalWaiting(slots, 10);
      for (let k = 0; k < 2; k++) slotOf(await slots.acquire('dead-5')).release(FAIL);
      expect(deferralOf(await slots.acquire('dead-5')).reason).toBe('degraded_limit');
      for (const s of dead) s.release(FAIL);
    });

    it('with the pool full, a retry waits here ahead of the jobs waiting before it and takes the next slot that frees', async () => {
      const slots = createWebhookSlots({ slots: 10, perWebhook: 10, maxLocalWaitMs: 5000 });
      slotOf(await slots.acquire('fast')).release(OK); // known fast: its jobs may wait here
      slotOf(await slots.acquire('failing')).release(QUICK_FAIL);
      slotOf(await slots.acquire('failing')).release(QUICK_FAIL); // degraded: its jobs are deferred rather than wait
      const held: Slot[] = [];
      for (let i = 0; i < 10; i++) held.push(slotOf(await slots.acquire(`busy-${i}`)));

      const firstInLine = slots.acquire('fast');
      const retry = slots.acquire('failing', RETRY);
      expect(slots.stats().waitingHere).toBe(2);
      held.shift()!.release(OK);
      const got = slotOf(await retry);
      expect(got.state).toBe('degraded');
      expect(slots.stats().waitingHere).toBe(1);
      held.shift()!.release(OK);
      held.push(slotOf(await firstInLine), got);
      for (const s of held) s.release(OK);
    });

    it("a quick webhook's retry may take the reserve a webhook already sending leaves free; a slow one's may not", async () => {
      const slots = createWebhookSlots({ slots: 20, perWebhook: 20, maxLocalWaitMs: 10, maxPoolWaitMs: 10 });
      slotOf(await slots.acquire('a')).release(OK);
      const a: Slot[] = [];
      for (let i = 0; i < 18; i++) a.push(slotOf(await slots.acquire('a')));
      expect(deferralOf(await slots.acquire('a')).reason).toBe('pool_reserve');
      a.push(slotOf(await slots.acquire('a', RETRY)));
      expect(slots.stats().held.healthy).toBe(19);
      // A slow webhook already sending: its retry waits for a slot below the reserve instead.
      slotOf(await slots.acquire('slow')).release({ ok: true, durationMs: 3000 });
      a.push(slotOf(await slots.acquire('slow')));
      const slowRetry = slots.acquire('slow', RETRY);
      expect(slots.stats().waitingHere).toBe(1);
      slots.close();
      expect(deferralOf(await slowRetry).reason).toBe('pool_reserve');
      for (const s of a) s.release(OK);
    });

    it('a degraded webhook that fails quickly waits in line for a full pool, as a healthy one does, rather than losing every race to it', async () => {
      const slots = createWebhookSlots({ slots: 10, perWebhook: 10, maxLocalWaitMs: 5000 });
      slotOf(await slots.acquire('f')).release(QUICK_FAIL);
      slotOf(await slots.acquire('f')).release(QUICK_FAIL); // degraded now, quick: 10 / 4 = 2 slots
      const held = [slotOf(await slots.acquire('f'))];
      for (let i = 0; i < 8; i++) held.push(slotOf(await slots.acquire(`h${i}`)));
      // 9 of 10 held: a webhook already sending must leave the reserve (1) free.
      const second = slots.acquire('f');
      expect(slots.stats().waitingHere).toBe(1);
      held.pop()!.release(OK);
      held.push(slotOf(await second));
      for (const h of held) h.release(OK);
    });

    it('a healthy webhook held back by the pool alone waits for the next slot, whatever its own backlog, rather than churning through deferrals', async () => {
      const slots = createWebhookSlots({ slots: 10, perWebhook: 10, maxLocalWaitMs: 100 });
      slotOf(await slots.acquire('b')).release({ ok: true, durationMs: 400 }); // a 400 ms receiver
      const held = [slotOf(await slots.acquire('b'))];
      for (let i = 0; i < 8; i++) held.push(slotOf(await slots.acquire(`h${i}`)));
      // 9 of 10 held, and b's own turn estimate (400 ms) is past the local wait of a webhook's backlog.
      const waiting = slots.acquire('b');
      expect(slots.stats().waitingHere).toBe(1);
      held.pop()!.release(OK);
      held.push(slotOf(await waiting));
      for (const h of held) h.release(OK);
    });

    it('a send held back by a pool the governor just shrank waits for the sends over the new size to end (up to a second), rather than being deferred after 100 ms', async () => {
      // Defaults: a webhook's own backlog waits 100 ms at most, a full pool 1 s.
      const slots = createWebhookSlots({ slots: 20 });
      const held: Slot[] = [];
      for (let i = 0; i < 10; i++) {
        slotOf(await slots.acquire(`w${i}`, { companyId: `c${i}` })).release({ ok: true, durationMs: 500 });
        held.push(slotOf(await slots.acquire(`w${i}`, { companyId: `c${i}` })));
      }
      // Shrunk by half: a webhook already sending gets no slot until fewer than four sends are in
      // flight (the new size, 5, less its reserve), that is until seven of the ten have ended.
      slots.resize(5);
      const t0 = Date.now();
      const waiting = slots.acquire('w0', { companyId: 'c0' });
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(slots.stats().waitingHere).toBe(1);
      for (const s of held.splice(1, 7)) s.release({ ok: true, durationMs: 500 });
      held.push(slotOf(await waiting));
      expect(Date.now() - t0).toBeGreaterThanOrEqual(300);
      expect(slots.refusals()).toBe(1);
      for (const s of held) s.release(OK);
    });

    it("a retry keeps its own webhook's bound: deferred, not waiting", async () => {
      const slots = createWebhookSlots({ slots: 50, perWebhook: 4, maxLocalWaitMs: 5000 });
      await rivalWaiting(slots, 50);
      slotOf(await slots.acquire('w')).release(QUICK_FAIL);
      slotOf(await slots.acquire('w')).release(QUICK_FAIL);
      const only = slotOf(await slots.acquire('w')); // degraded: 4 / 4 = 1 slot
      const t0 = Date.now();
      expect(deferralOf(await slots.acquire('w', RETRY)).reason).toBe('degraded_limit');
      expect(Date.now() - t0).toBeLessThan(20);
      only.release(QUICK_FAIL);
    });

    it("a dead endpoint's retry waits here for the next slot of the budget rather than for its attempts' length (5 s)", async () => {
      const slots = createWebhookSlots({ slots: 10, perWebhook: 8 });
      const dead = await deadHolding(slots, 5);
      await rivalWaiting(slots, 10);
      for (let k = 0; k < 2; k++) slotOf(await slots.acquire('late')).release(FAIL);
      // Its first attempts still go back to the queue until their turn.
      expect(deferralOf(await slots.acquire('late')).deferUntil - Date.now()).toBeGreaterThanOrEqual(4000);
      const retry = slots.acquire('late', RETRY);
      expect(slots.stats().waitingHere).toBe(1);
      dead.shift()!.release(FAIL);
      const got = slotOf(await retry);
      expect(slots.stats().held.degraded).toBe(5);
      for (const s of [...dead, got]) s.release(FAIL);
    });

    it("only a tenth of the pool's jobs wait here for slow webhooks' retries; the next is deferred", async () => {
      const slots = createWebhookSlots({ slots: 10, perWebhook: 8 });
      const dead = await deadHolding(slots, 5);
      await rivalWaiting(slots, 10);
      for (let k = 0; k < 2; k++) for (const id of ['late-1', 'late-2']) slotOf(await slots.acquire(id)).release(FAIL);
      const waiting = slots.acquire('late-1', RETRY);
      expect(deferralOf(await slots.acquire('late-2', RETRY)).reason).toBe('degraded_limit');
      slots.close();
      expect(deferralOf(await waiting).reason).toBe('pool_reserve');
      for (const s of dead) s.release(FAIL);
    });
  });

  describe('between companies first, then between their webhooks (issue 28)', () => {
    /** A receiver that answers 2xx after 4.9 s. */
    const SLOW_OK = { ok: true, durationMs: 4900 };

    it("one company's webhooks together hold at most its share, and another company still finds the rest", async () => {
      // 50 slots, 25 per webhook, 25 per company: before, 20 webhooks of one company took 45.
      const slots = createWebhookSlots({ slots: 50, perWebhook: 25, perCompany: 25, maxLocalWaitMs: 10 });
      await rivalWaiting(slots, 50);
      const a: Slot[] = [];
      for (let round = 0; round < 3; round++) {
        for (let i = 0; i < 20; i++) {
          const got = await slots.acquire(`a-${i}`, { companyId: 'A' });
          if ('slot' in got) a.push(got.slot);
          else expect(got.reason).toBe('company_limit');
        }
      }
      expect(a).toHaveLength(25);
      // Company B, one webhook, sends 20 at once: every one starts (its share is untouched).
      const b: Slot[] = [];
      for (let i = 0; i < 20; i++) b.push(slotOf(await slots.acquire('b', { companyId: 'B' })));
      expect(slots.stats().held.healthy).toBe(45);
      // A's slot freed goes back to A's share only.
      a.pop()!.release(OK);
      slotOf(await slots.acquire('a-0', { companyId: 'A' })).release(OK);
      for (const s of [...a, ...b]) s.release(OK);
    });

    it("a webhook without a company given is a company of its own (the webhook's bound alone)", async () => {
      const slots = createWebhookSlots({ slots: 50, perWebhook: 10, perCompany: 10 });
      const held: Slot[] = [];
      for (let i = 0; i < 4; i++) for (let k = 0; k < 5; k++) held.push(slotOf(await slots.acquire(`w-${i}`)));
      expect(slots.stats().held.healthy).toBe(20);
      for (const s of held) s.release(OK);
    });

    it('an endpoint whose median answer is over 2 s counts as degraded, though it answers 2xx, and recovers when it is quick again', async () => {
      const changes: Array<[string, SlotState]> = [];
      const slots = createWebhookSlots({ slots: 50, perWebhook: 8, onStateChange: (id, state) => changes.push([id, state]) });
      await rivalWaiting(slots, 50);
      // One or two slow answers are not enough (a cold start); a median of three is.
      slotOf(await slots.acquire('slow', { companyId: 'A' })).release(SLOW_OK);
      slotOf(await slots.acquire('slow', { companyId: 'A' })).release(SLOW_OK);
      expect(slots.stats().degradedWebhooks).toBe(0);
      slotOf(await slots.acquire('slow', { companyId: 'A' })).release(SLOW_OK);
      expect(changes).toEqual([['slow', 'degraded']]);
      // Degraded: 8 / 4 = 2 slots, and its next job is deferred by its attempts' length.
      const held = [slotOf(await slots.acquire('slow', { companyId: 'A' })), slotOf(await slots.acquire('slow', { companyId: 'A' }))];
      expect(slots.stats().held).toEqual({ healthy: 0, degraded: 2 });
      const deferred = deferralOf(await slots.acquire('slow', { companyId: 'A' }));
      expect(deferred.reason).toBe('degraded_limit');
      expect(deferred.deferUntil - Date.now()).toBeGreaterThanOrEqual(3000);
      // Just under the threshold is not slow.
      slotOf(await slots.acquire('steady', { companyId: 'A' })).release({ ok: true, durationMs: 1900 });
      for (let i = 0; i < 4; i++) slotOf(await slots.acquire('steady', { companyId: 'A' })).release({ ok: true, durationMs: 1900 });
      expect(changes).toEqual([['slow', 'degraded']]);
      // Quick answers bring the median under 2 s: healthy again.
      for (const s of held) s.release(OK);
      slotOf(await slots.acquire('slow', { companyId: 'A' })).release(OK);
      expect(changes).toEqual([
        ['slow', 'degraded'],
        ['slow', 'healthy'],
      ]);
    });

    it("20 slow 2xx webhooks of one company are held to their company's part of the degraded budget; a second company's halves it", async () => {
      const slots = createWebhookSlots({ slots: 50, perWebhook: 25, perCompany: 25, maxLocalWaitMs: 10 });
      for (let i = 0; i < 20; i++) for (let k = 0; k < 3; k++) slotOf(await slots.acquire(`a-${i}`, { companyId: 'A' })).release(SLOW_OK);
      for (let i = 0; i < 3; i++) for (let k = 0; k < 3; k++) slotOf(await slots.acquire(`c-${i}`, { companyId: 'C' })).release(SLOW_OK);
      await rivalWaiting(slots, 50);
      expect(slots.stats().degradedWebhooks).toBe(23);
      // Each slow webhook may hold 25 / 4 = 6; C holds one slot first: A and C then share the
      // degraded budget (50 / 2 = 25) half and half, so A stops at 13 though the budget has room.
      const c = slotOf(await slots.acquire('c-0', { companyId: 'C' }));
      const a: Slot[] = [];
      for (let round = 0; round < 2; round++) {
        for (let i = 0; i < 20; i++) {
          const got = await slots.acquire(`a-${i}`, { companyId: 'A' });
          if ('slot' in got) a.push(got.slot);
          else expect(got.reason).toBe('degraded_limit');
        }
      }
      expect(a).toHaveLength(13);
      expect(slots.stats().held.degraded).toBe(14);
      // C takes the rest of the budget.
      const more: Slot[] = [];
      for (let i = 0; i < 11; i++) more.push(slotOf(await slots.acquire(`c-${i % 3}`, { companyId: 'C' })));
      expect(deferralOf(await slots.acquire('c-2', { companyId: 'C' })).reason).toBe('degraded_limit');
      expect(slots.stats().held.degraded).toBe(25);
      // A healthy company still starts at once, beside both.
      const b = await Promise.all(Array.from({ length: 10 }, async () => slotOf(await slots.acquire('b', { companyId: 'B' }))));
      expect(slots.stats().held).toEqual({ healthy: 10, degraded: 25 });
      for (const s of [c, ...a, ...more, ...b]) s.release(SLOW_OK);
    });
  });

  describe('work-conserving shares (issue 41): they bind only while someone under theirs wants a slot', () => {
    const SLOW_OK = { ok: true, durationMs: 4000 };

    it('a slow 2xx webhook alone borrows past its degraded cap up to the headroom (half the pool for slow ones); a newcomer finds the headroom at once', async () => {
      // 50 slots: a share of 25, a degraded cap of 6, a slow borrower's headroom of 25.
      const slots = createWebhookSlots({ slots: 50, perWebhook: 25, perCompany: 25, maxLocalWaitMs: 10 });
      for (let k = 0; k < 3; k++) slotOf(await slots.acquire('slow', { companyId: 'A' })).release(SLOW_OK);
      expect(slots.stats().degradedWebhooks).toBe(1);
      const held: Slot[] = [];
      for (let i = 0; i < 40; i++) {
        const got = await slots.acquire('slow', { companyId: 'A' });
        if ('slot' in got) held.push(got.slot);
        else expect(got.reason).toBe('degraded_limit');
      }
      expect(held).toHaveLength(25);
      expect(slots.lentToDegraded()).toBe(25 - 6);
      // Its next turn is estimated by what it may borrow (25 slots of 4 s), not by its cap (6).
      const next = deferralOf(await slots.acquire('slow', { companyId: 'A' }));
      expect(next.deferUntil - Date.now()).toBeLessThan(3 * 4000 * 1.25 + 50);
      // Another company starts at once, in the headroom, up to the pool.
      const b: Slot[] = [];
      for (let i = 0; i < 25; i++) b.push(slotOf(await slots.acquire(`b-${i}`, { companyId: `B${i}` })));
      expect(slots.inFlight()).toBe(50);
      for (const s of [...held, ...b]) s.release(SLOW_OK);
      expect(slots.lentToDegraded()).toBe(0);
    });

    it('once a webhook under its shares waits, the next slot freed goes to it, before a borrower that waited first', async () => {
      const slots = createWebhookSlots({ slots: 10, perWebhook: 5, perCompany: 5, maxLocalWaitMs: 5000, maxPoolWaitMs: 5000 });
      slotOf(await slots.acquire('a', { companyId: 'A' })).release(OK);
      slotOf(await slots.acquire('b', { companyId: 'B' })).release(OK);
      // A alone, quick: 5 of its share and 2 borrowed (a quick borrower's headroom is 3); its next send waits here.
      const a: Slot[] = [];
      for (let i = 0; i < 7; i++) a.push(slotOf(await slots.acquire('a', { companyId: 'A' })));
      expect(slots.lentToDegraded()).toBe(0); // healthy: lent, but not counted against the governor's growth
      const aWaits = slots.acquire('a', { companyId: 'A' });
      // B takes the headroom but the reserve, then its next send waits here (under its share).
      const b = [slotOf(await slots.acquire('b', { companyId: 'B' })), slotOf(await slots.acquire('b', { companyId: 'B' }))];
      const bWaits = slots.acquire('b', { companyId: 'B' });
      expect(slots.stats().waitingHere).toBe(2);
      // A slot of A's frees: B's share binds A at once, so it goes to B.
      a.shift()!.release(OK);
      b.push(slotOf(await bWaits));
      expect(slots.stats().waitingHere).toBe(1);
      // A back under its share: its own waiter starts.
      for (const s of a.splice(0, 3)) s.release(OK);
      a.push(slotOf(await aWaits));
      for (const s of [...a, ...b]) s.release(OK);
    });
  });

  it('close sends every waiter away deferred', async () => {
    const slots = createWebhookSlots({ slots: 1, perWebhook: 1, maxLocalWaitMs: 10_000 });
    slotOf(await slots.acquire('a')).release(OK);
    const first = slotOf(await slots.acquire('a'));
    const waiting = slots.acquire('a');
    expect(slots.stats().waitingHere).toBe(1);
    slots.close();
    expect(deferralOf(await waiting).deferUntil).toBeGreaterThan(0);
    first.release(OK);
  });
});
