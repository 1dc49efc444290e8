import { AppError, EVENT_NAMES, type DeliveryState, type EventName } from '@svc/contracts';
import { pageParams, singleParam } from '../http/query-params';
import type { DeliveryFilters, LogPosition } from './delivery.repository';

const ESTADOS: readonly DeliveryState[] = ['pendiente', 'exitosa', 'fallida'];
// A calendar date, or a date and time with an optional offset (ISO 8601 as integrators write it).
const ISO_8601 = /^\d{4}-\d{2}-\d{2}(?:[Tt ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:[Zz]|[+-]\d{2}:?\d{2})?)?$/;

function oneOf<T extends string>(query: Record<string, unknown>, name: string, allowed: readonly T[]): T | undefined {
  const value = singleParam(query, name);
  if (value === undefined) return undefined;
  if (!(allowed as readonly string[]).includes(value)) throw new AppError('VALIDATION_ERROR', `${name} must be one of ${allowed.join(', ')}`);
  return value as T;
}

/** An ISO 8601 date or date-time as integrators write it, or 400 VALIDATION_ERROR naming the field. */
export function parseInstant(name: string, value: string): Date {
  const at = ISO_8601.test(value) ? new Date(value) : undefined;
  if (!at || Number.isNaN(at.getTime())) throw new AppError('VALIDATION_ERROR', `${name} must be an ISO 8601 date or date-time`);
  return at;
}

function instant(query: Record<string, unknown>, name: string): Date | undefined {
  const value = singleParam(query, name);
  return value === undefined ? undefined : parseInstant(name, value);
}

// The cursor is the last delivery's position, encoded so that callers treat it as opaque.
export const encodeLogCursor = (p: LogPosition): string => Buffer.from(`${p.at}|${p.id}`, 'utf8').toString('base64url');

const CURSOR = /^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{1,6})?[+-]\d{2}(?::\d{2})?)\|([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/;

function decodeLogCursor(cursor: string): LogPosition {
  const text = /^[A-Za-z0-9_-]{1,200}$/.test(cursor) ? Buffer.from(cursor, 'base64url').toString('utf8') : '';
  const m = CURSOR.exec(text);
  if (!m || encodeLogCursor({ at: m[1]!, id: m[2]! }) !== cursor) {
    throw new AppError('VALIDATION_ERROR', 'cursor is not a cursor returned by this listing');
  }
  return { at: m[1]!, id: m[2]! };
}

/** The delivery log's query: limit, cursor, exitoso, estado, evento, desde, hasta. */
export function parseLogQuery(query: Record<string, unknown>): { limit: number; after: LogPosition | undefined; filters: DeliveryFilters } {
  const { limit, after } = pageParams(query, decodeLogCursor);
  const exitoso = oneOf(query, 'exitoso', ['true', 'false'] as const);
  const filters: DeliveryFilters = {
    exitoso: exitoso === undefined ? undefined : exitoso === 'true',
    estado: oneOf(query, 'estado', ESTADOS),
    evento: oneOf<EventName>(query, 'evento', EVENT_NAMES),
    desde: instant(query, 'desde'),
    hasta: instant(query, 'hasta'),
  };
  if (filters.desde && filters.hasta && filters.desde >= filters.hasta) {
    throw new AppError('VALIDATION_ERROR', 'desde must be before hasta');
  }
  return { limit, after, filters };
}
