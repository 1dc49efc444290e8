import type { RequestHandler, Router } from 'express';
import { AppError } from '@svc/contracts';

type Method = 'get' | 'post' | 'patch' | 'delete' | 'put';
export type Handlers = Partial<Record<Method, RequestHandler | RequestHandler[]>>;

/**
 * Records the matched template while `req.baseUrl` still holds the mount point: an error thrown
 * later leaves the router, which puts `baseUrl` back, and the access log would lose the prefix.
 */
const rememberTemplate: RequestHandler = (req, _res, next) => {
  req.routeTemplate = `${req.baseUrl}${String((req.route as { path: string }).path)}`;
  next();
};

/**
 * Registers a path's handlers and answers every other method on it with 405 and `Allow`, so "a
 * known path with another method" is decided where the path is declared. One express route per
 * path, so the router matches the path once rather than once per method.
 */
export function route(router: Router, path: string, handlers: Handlers): void {
  const r = router.route(path).all(rememberTemplate);
  const methods = Object.keys(handlers) as Method[];
  for (const m of methods) {
    const h = handlers[m];
    if (h) r[m](...(Array.isArray(h) ? h : [h]));
  }
  const allow = methods.map((m) => m.toUpperCase()).join(', ');
  r.all((_req, res) => {
    res.setHeader('Allow', allow);
    throw new AppError('METHOD_NOT_ALLOWED', `method not allowed; allowed: ${allow}`);
  });
}
