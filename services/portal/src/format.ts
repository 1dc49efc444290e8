// Times as the company reads them: Guatemala's clock (UTC-6 all year), with the date.

export const TIME_ZONE = 'America/Guatemala';

const dateTime = new Intl.DateTimeFormat('es-GT', {
  timeZone: TIME_ZONE,
  day: '2-digit',
  month: 'short',
  year: 'numeric',
  hour: '2-digit',
  minute: '2-digit',
  second: '2-digit',
  hour12: false,
});
const hourOnly = new Intl.DateTimeFormat('es-GT', { timeZone: TIME_ZONE, hour: '2-digit', minute: '2-digit', hour12: false });

export function fecha(iso: string | null | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? '—' : dateTime.format(d);
}

export function hora(iso: string): string {
  return hourOnly.format(new Date(iso));
}

export const numero = (n: number): string => new Intl.NumberFormat('es-GT').format(n);

/** Guatemala's wall-clock `YYYY-MM-DDTHH:MM` (a datetime-local field) as an instant. */
export function guatemalaInputToIso(value: string): string | undefined {
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}$/.test(value)) return undefined;
  const d = new Date(`${value}:00-06:00`);
  return Number.isNaN(d.getTime()) ? undefined : d.toISOString();
}

/** An instant as Guatemala's wall clock for a datetime-local field. */
export function isoToGuatemalaInput(at: Date): string {
  return new Date(at.getTime() - 6 * 3600_000).toISOString().slice(0, 16);
}

export const MODO_NOMBRE: Record<'live' | 'test', string> = { live: 'Producción', test: 'Sandbox' };

export const ESTADO_ENTREGA: Record<string, string> = { pendiente: 'Pendiente', exitosa: 'Exitosa', fallida: 'Fallida' };
