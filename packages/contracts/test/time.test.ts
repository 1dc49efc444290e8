import { fromGuatemalaClock, guatemalaClock, guatemalaDay, nextGuatemalaMidnight, secondsToGuatemalaMidnight } from '../src/time';

/** Guatemala's wall clock from the tz database, not from the module's own offset. */
function tzClock(at: Date): string {
  return new Intl.DateTimeFormat('en-CA', {
    timeZone: 'America/Guatemala',
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
    hourCycle: 'h23',
  }).format(at);
}

const two = (n: number) => String(n).padStart(2, '0');

describe("the courier's day", () => {
  // Either side of Guatemala's midnight (06:00 UTC), of UTC's, of a year's end and of 29 February.
  const instants = ['2026-11-21T23:30:00Z', '2026-11-22T05:59:59Z', '2026-11-22T06:00:00Z', '2027-01-01T03:00:00Z', '2028-02-29T05:00:00Z', '2028-03-01T06:00:00Z', '2026-06-15T12:34:56Z'].map((s) => new Date(s));

  it("reads Guatemala's clock as the tz database does, all year", () => {
    for (const at of instants) {
      const c = guatemalaClock(at);
      expect(`${c.year}-${two(c.month)}-${two(c.day)}, ${two(c.hour)}:${two(c.minute)}:${two(c.second)}`).toBe(tzClock(at));
      expect(guatemalaDay(at)).toBe(tzClock(at).slice(0, 10));
    }
  });

  it('turns a reading of that clock back into its instant, and refuses a date no calendar has', () => {
    for (const at of instants) expect(fromGuatemalaClock(guatemalaClock(at))).toEqual(at);
    expect(fromGuatemalaClock({ year: 2026, month: 2, day: 31, hour: 10, minute: 0, second: 0 })).toBeUndefined();
    expect(fromGuatemalaClock({ year: 2026, month: 12, day: 1, hour: 24, minute: 0, second: 0 })).toBeUndefined();
  });

  it('resets at the next midnight in Guatemala: the instant and the seconds to it', () => {
    expect(nextGuatemalaMidnight(new Date('2026-11-21T23:30:00Z')).toISOString()).toBe('2026-11-22T06:00:00.000Z');
    expect(nextGuatemalaMidnight(new Date('2026-11-22T06:00:00Z')).toISOString()).toBe('2026-11-23T06:00:00.000Z');
    expect(secondsToGuatemalaMidnight(new Date('2026-11-22T05:59:59Z'))).toBe(1);
    expect(secondsToGuatemalaMidnight(new Date('2026-11-22T06:00:00Z'))).toBe(24 * 3600);
    expect(secondsToGuatemalaMidnight(new Date('2026-11-22T05:59:59.500Z'))).toBe(1);
  });
});
