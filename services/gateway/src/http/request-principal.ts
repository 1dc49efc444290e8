import type { Request } from 'express';
import type { Principal } from '../auth/principal';

/** The caller of an `/api/v1` route: `authenticate` runs before every one of them and sets it, or answers 401. */
export function principalOf(req: Request): Principal {
  return req.principal!;
}
