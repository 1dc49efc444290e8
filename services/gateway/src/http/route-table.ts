import type { RequestHandler, Router } from 'express';
import { AppError } from '@svc/schema';

type Method = 'get' | 'post' | 'patch' | 'delete' | 'put';
export type Handlers = Partial<Record<Method, RequestHandler | RequestHandler[]>>;

/**
 * Registers a path's handlers and answers every other method on it with 405 and `Allow`,
 * so "a known path with another method" is decided where the path is declared.
 */
export function route(router: Router, path: string, handlers: Handlers): void {
  const methods = Object.keys(handlers) as Method[];
  for (const m of methods) {
    const h = handlers[m];
    if (h) router[m](path, ...(Array.isArray(h) ? h : [h]));
  }
  const allow = methods.map((m) => m.toUpperCase()).join(', ');
  router.all(path, (_req, res) => {
    res.setHeader('Allow', allow);
    throw new AppError('METHOD_NOT_ALLOWED', `method not allowed; allowed: ${allow}`);
  });
}
