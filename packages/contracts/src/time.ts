/** Guatemala keeps UTC-6 all year (no daylight saving): the daily shipment limit resets at its midnight. */
const GUATEMALA_OFFSET_MS = -6 * 3600 * 1000;

/** The Guatemala calendar day of an instant, as 'YYYY-MM-DD'. */
export function guatemalaDay(at: Date): string {
  return new Date(at.getTime() + GUATEMALA_OFFSET_MS).toISOString().slice(0, 10);
}

/** Whole seconds from `at` to the next midnight in Guatemala, when the daily limit resets (at least 1). */
export function secondsToGuatemalaMidnight(at: Date): number {
  const local = at.getTime() + GUATEMALA_OFFSET_MS;
  const day = 24 * 3600 * 1000;
  return Math.max(1, Math.ceil((Math.floor(local / day + 1) * day - local) / 1000));
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
