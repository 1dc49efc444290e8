import { createInFlightGovernor, nextLimit } from '../src/concurrency/in-flight.governor';
import { loadDispatcherConfig } from '../src/config';
import { createWebhookSlots, type Admission, type Slot } from '../src/fair-share/webhook-slots.limiter';

/** The adaptive in-flight limit: its rule on its own, and the pool it resizes (the figures are the bench's). */

const bounds = { floor: 50, ceiling: 2000 };
const slotOf = (a: Admission): Slot => {
  if (!('slot' in a)) throw new Error(`expected a slot, got a deferral (${a.reason})`);
  return a.slot;
};
const OK = { ok: true, durationMs: 100 };

describe('in-flight limit rule', () => {
  it('a full pool on an idle thread doubles (sends waiting on receivers), up to the ceiling', () => {
    expect(nextLimit(50, { used: 0.95, refused: 0, busy: 0.1 }, bounds)).toBe(100);
    expect(nextLimit(1500, { used: 1, refused: 0, busy: 0.1 }, bounds)).toBe(2000);
  });

  it('a pool that refused sends for want of room grows though it was not full on average', () => {
    expect(nextLimit(50, { used: 0.5, refused: 3, busy: 0.1 }, bounds)).toBe(100);
  });

  it('grows by a quarter as the thread gets busy, holds near its limit, shrinks when it is the bottleneck', () => {
    expect(nextLimit(400, { used: 1, refused: 0, busy: 0.6 }, bounds)).toBe(500);
    expect(nextLimit(400, { used: 1, refused: 0, busy: 0.9 }, bounds)).toBe(400);
    expect(nextLimit(400, { used: 1, refused: 0, busy: 0.99 }, bounds)).toBe(320);
    expect(nextLimit(55, { used: 1, refused: 0, busy: 0.99 }, bounds)).toBe(50);
  });

  it('a pool with room holds its size, and eases back to the floor only after a long idle spell', () => {
    expect(nextLimit(400, { used: 0.5, refused: 0, busy: 0.3 }, bounds)).toBe(400);
    expect(nextLimit(400, { used: 0.1, refused: 0, busy: 0.1 }, bounds, 5)).toBe(400);
    expect(nextLimit(400, { used: 0.1, refused: 0, busy: 0.1 }, bounds, 29)).toBe(320);
  });

  it('a fixed limit (floor = ceiling) never moves', () => {
    const fixed = { floor: 50, ceiling: 50 };
    expect(nextLimit(50, { used: 1, refused: 9, busy: 0 }, fixed)).toBe(50);
    expect(nextLimit(50, { used: 1, refused: 0, busy: 1 }, fixed)).toBe(50);
  });
});

describe('in-flight governor', () => {
  it('widens a pool that slow sends keep full, and the pool admits the sends it held back', async () => {
    const slots = createWebhookSlots({ slots: 4, maxLocalWaitMs: 5000, maxPoolWaitMs: 5000 });
    // Healthy, known webhooks, each sending one at a time: the pool is the only bound in the way.
    for (const id of ['a', 'b', 'c', 'd', 'e', 'f']) slotOf(await slots.acquire(id, { companyId: id })).release(OK);
    const held = await Promise.all(['a', 'b', 'c'].map(async (id) => slotOf(await slots.acquire(id, { companyId: id }))));
    // A second send of a webhook already sending would eat the reserve (one slot of four): it waits here.
    const waiting = slots.acquire('a', { companyId: 'a' });
    expect(slots.stats().waitingHere).toBe(1);
    const limits: number[] = [];
    const governor = createInFlightGovernor({
      floor: 4,
      ceiling: 64,
      used: () => slots.inFlight() / slots.limit(),
      refusals: () => slots.refusals(),
      apply: (limit) => {
        limits.push(limit);
        slots.resize(limit);
      },
    });
    governor.start();
    try {
      const started = slotOf(await waiting);
      held.push(started);
      expect(limits[0]).toBeGreaterThan(4);
      expect(slots.limit()).toBe(governor.limit());
    } finally {
      governor.stop();
      for (const s of held) s.release(OK);
    }
  });

  it('a smaller pool cuts no send short: it admits none until enough have ended', async () => {
    const slots = createWebhookSlots({ slots: 10, perWebhook: 10, maxLocalWaitMs: 10 });
    const held: Slot[] = [];
    for (let i = 0; i < 8; i++) held.push(slotOf(await slots.acquire(`w${i}`, { companyId: `c${i}` })));
    slots.resize(4);
    expect(slots.inFlight()).toBe(8);
    expect('deferUntil' in (await slots.acquire('x', { companyId: 'x' }))).toBe(true);
    for (const s of held.splice(0, 5)) s.release(OK);
    expect('slot' in (await slots.acquire('x', { companyId: 'x' }))).toBe(true);
    for (const s of held) s.release(OK);
  });
});

describe('in-flight settings', () => {
  // The common settings' defaults suffice here; only the dispatcher's own are read.
  const load = (env: Record<string, string>) => loadDispatcherConfig({ NODE_ENV: 'test', ...env });

  it('unset, DISPATCHER_CONCURRENCY is the floor (50) of a limit that may reach DISPATCHER_MAX_IN_FLIGHT, with shares that follow it', () => {
    expect(load({})).toMatchObject({ concurrency: 50, maxInFlight: 2000, webhookConcurrency: undefined, companyConcurrency: undefined });
    expect(load({ DISPATCHER_MAX_IN_FLIGHT: '300' })).toMatchObject({ concurrency: 50, maxInFlight: 300 });
  });

  it('set, it is a fixed bound with fixed shares (half of it), as docs/operations.md says', () => {
    expect(load({ DISPATCHER_CONCURRENCY: '50' })).toMatchObject({ concurrency: 50, maxInFlight: 50, webhookConcurrency: 25, companyConcurrency: 25 });
    expect(load({ DISPATCHER_CONCURRENCY: '20', DISPATCHER_MAX_IN_FLIGHT: '400' })).toMatchObject({ concurrency: 20, maxInFlight: 400, webhookConcurrency: undefined });
  });

  it('refuses a ceiling below the floor', () => {
    expect(() => load({ DISPATCHER_CONCURRENCY: '100', DISPATCHER_MAX_IN_FLIGHT: '10' })).toThrow(/DISPATCHER_MAX_IN_FLIGHT/);
  });
});
