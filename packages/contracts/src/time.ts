/**
 * The courier's day: the calendar of Guatemala, whose clock keeps UTC-6 all year (no daylight
 * saving). Its midnight resets the daily shipment limit (the quota and its `Retry-After`), and the
 * portal shows every time on this clock. The module has no imports: the portal's bundle takes it by
 * path, without the package's Node side.
 */
export const GUATEMALA_TIME_ZONE = 'America/Guatemala';

/** Guatemala's offset from UTC, the same every day of the year. */
const GUATEMALA_OFFSET_MS = -6 * 3600 * 1000;

const DAY_MS = 24 * 3600 * 1000;

/** A wall-clock reading in Guatemala: month 1-12, hour 0-23. */
export interface GuatemalaClock {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
}

/** What Guatemala's clocks show at `at`. */
export function guatemalaClock(at: Date): GuatemalaClock {
  const local = new Date(at.getTime() + GUATEMALA_OFFSET_MS);
  return {
    year: local.getUTCFullYear(),
    month: local.getUTCMonth() + 1,
    day: local.getUTCDate(),
    hour: local.getUTCHours(),
    minute: local.getUTCMinutes(),
    second: local.getUTCSeconds(),
  };
}

/** The instant at which Guatemala's clocks show `c`; undefined for a reading no calendar has (31 feb). */
export function fromGuatemalaClock(c: GuatemalaClock): Date | undefined {
  const utc = Date.UTC(c.year, c.month - 1, c.day, c.hour, c.minute, c.second);
  const back = new Date(utc);
  const exact =
    back.getUTCFullYear() === c.year &&
    back.getUTCMonth() === c.month - 1 &&
    back.getUTCDate() === c.day &&
    back.getUTCHours() === c.hour &&
    back.getUTCMinutes() === c.minute &&
    back.getUTCSeconds() === c.second;
  return exact ? new Date(utc - GUATEMALA_OFFSET_MS) : undefined;
}

/** The Guatemala calendar day of an instant, as 'YYYY-MM-DD'. */
export function guatemalaDay(at: Date): string {
  return new Date(at.getTime() + GUATEMALA_OFFSET_MS).toISOString().slice(0, 10);
}

/** The next midnight in Guatemala after `at`, when the daily limit resets. */
export function nextGuatemalaMidnight(at: Date): Date {
  const local = at.getTime() + GUATEMALA_OFFSET_MS;
  return new Date((Math.floor(local / DAY_MS) + 1) * DAY_MS - GUATEMALA_OFFSET_MS);
}

/** Whole seconds from `at` to the next midnight in Guatemala, when the daily limit resets (at least 1). */
export function secondsToGuatemalaMidnight(at: Date): number {
  return Math.max(1, Math.ceil((nextGuatemalaMidnight(at).getTime() - at.getTime()) / 1000));
}

/** Injectable time, so the midnight reset can be tested. */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export function isUuid(value: string): boolean {
  return UUID.test(value);
}
