import { Router } from 'express';
import { route } from '../http/route-table';
// The JSON form of openapi/openapi.yaml (node openapi/build.mjs writes it; a test keeps the two equal).
// Imported rather than read from disk, so the bundle and a deployed tree carry it as they are.
import document from './openapi.json';

/** The OpenAPI document, as served. */
export const openApiDocument: Readonly<Record<string, unknown>> = document;

/** Where the router serves the document, relative to where it is mounted. */
export const OPENAPI_PATH = '/openapi.json';

/**
 * `GET /openapi.json`: the OpenAPI 3.1 document of the public API and the internal routes, without a
 * token. Mounted outside `/api/v1`, where the contract wants a bearer token on every route. The body
 * is serialised once; other methods answer 405 as every declared path does.
 */
export function openApiRouter(): Router {
  const body = JSON.stringify(document);
  const router = Router({ caseSensitive: true, strict: false });
  route(router, OPENAPI_PATH, {
    get: (_req, res) => {
      res.setHeader('Cache-Control', 'public, max-age=300');
      res.type('application/json').send(body);
    },
  });
  return router;
}
