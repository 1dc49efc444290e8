// Times as the company reads them, on the courier's clock (Guatemala's, from the contracts' time
// module) and in one format whatever the browser's language: "01 dic 2026, 15:27:03" for what
// happened, "01 dic 2026, 15:27" in a date field.

// The contracts' pure module (no imports), by path: Vite bundles it without the package's node side.
import { fromGuatemalaClock, guatemalaClock, GUATEMALA_TIME_ZONE } from '../../../packages/contracts/src/time';

export const TIME_ZONE = GUATEMALA_TIME_ZONE;

const MONTHS = ['ene', 'feb', 'mar', 'abr', 'may', 'jun', 'jul', 'ago', 'sep', 'oct', 'nov', 'dic'] as const;
const two = (n: number): string => String(n).padStart(2, '0');

function dayAndTime(at: Date, seconds: boolean): string {
  const c = guatemalaClock(at);
  return `${two(c.day)} ${MONTHS[c.month - 1]} ${c.year}, ${two(c.hour)}:${two(c.minute)}${seconds ? `:${two(c.second)}` : ''}`;
}

/** An instant the API gave, as the page shows it: "01 dic 2026, 15:27:03" ("—" for none). */
export function formatDateTime(iso: string | null | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? '—' : dayAndTime(d, true);
}

/** The hour of an instant: "15:00" (the chart's ticks). */
export function formatHour(iso: string): string {
  const c = guatemalaClock(new Date(iso));
  return `${two(c.hour)}:${two(c.minute)}`;
}

export const formatNumber = (n: number): string => new Intl.NumberFormat('es-GT').format(n);

/** What a date field holds: "01 dic 2026, 15:27". */
export function formatDateInput(at: Date): string {
  return dayAndTime(at, false);
}

/** How a date field is written, for its hint. */
export const DATE_INPUT_EXAMPLE = '01 dic 2026, 15:27';

const WRITTEN = /^(\d{1,2})\s+([a-z]+)\.?,?\s+(\d{4}),?\s+(\d{1,2}):(\d{2})(?::(\d{2}))?$/;
const ISO_LIKE = /^(\d{4})-(\d{2})-(\d{2})[t\s](\d{1,2}):(\d{2})(?::(\d{2}))?$/;

/** A month by its first letters ("dic", "dic.", "diciembre"; "set" as "setiembre" is said too). */
function monthOf(word: string): number | undefined {
  const head = word.slice(0, 3);
  if (head === 'set') return 9;
  const i = MONTHS.indexOf(head as (typeof MONTHS)[number]);
  return i === -1 ? undefined : i + 1;
}

/**
 * A date field's text as an instant, read on Guatemala's clock: the page's own format
 * ("01 dic 2026, 15:27", seconds optional) or `2026-12-01 15:27`; undefined when it is neither.
 */
export function parseDateInput(value: string): Date | undefined {
  const text = value.trim().toLowerCase().replace(/\s+/g, ' ');
  const w = WRITTEN.exec(text);
  const i = w ? undefined : ISO_LIKE.exec(text);
  let fields: [number, number | undefined, number, number, number, number] | undefined;
  if (w) fields = [Number(w[3]), monthOf(w[2]!), Number(w[1]), Number(w[4]), Number(w[5]), Number(w[6] ?? 0)];
  else if (i) fields = [Number(i[1]), Number(i[2]), Number(i[3]), Number(i[4]), Number(i[5]), Number(i[6] ?? 0)];
  if (!fields) return undefined;
  const [year, month, day, hour, minute, second] = fields;
  if (month === undefined) return undefined;
  return fromGuatemalaClock({ year, month, day, hour, minute, second });
}

export const MODO_NOMBRE: Record<'live' | 'test', string> = { live: 'Producción', test: 'Sandbox' };

export const ESTADO_ENTREGA: Record<string, string> = { pendiente: 'Pendiente', exitosa: 'Exitosa', fallida: 'Fallida' };
