import { AppError } from '@svc/contracts';

/** A page of a listing: `?limit=` 1..100, 50 when absent. */
export const DEFAULT_PAGE = 50;
export const MAX_PAGE = 100;

/** A query parameter given at most once (the simple parser makes a repeated one an array). */
export function singleParam(query: Record<string, unknown>, name: string): string | undefined {
  const value = query[name];
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw new AppError('VALIDATION_ERROR', `${name} must be given once`);
  return value;
}

/** `?limit=` and the opaque `?cursor=` of the previous page, decoded by the listing that issued it. */
export function pageParams<C>(query: Record<string, unknown>, decodeCursor: (cursor: string) => C): { limit: number; after: C | undefined } {
  const limitText = singleParam(query, 'limit');
  let limit = DEFAULT_PAGE;
  if (limitText !== undefined) {
    limit = /^[0-9]{1,3}$/.test(limitText) ? Number(limitText) : 0;
    if (limit < 1 || limit > MAX_PAGE) throw new AppError('VALIDATION_ERROR', `limit must be an integer from 1 to ${MAX_PAGE}`);
  }
  const cursor = singleParam(query, 'cursor');
  return { limit, after: cursor === undefined ? undefined : decodeCursor(cursor) };
}
