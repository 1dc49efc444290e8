import { Router } from 'express';
import { route } from '../http/route-table';
// The JSON forms of openapi/openapi.yaml (node openapi/build.mjs writes them; a test keeps them equal
// to what the YAML builds). Imported rather than read from disk, so the bundle and a deployed tree
// carry them as they are.
import document from './openapi.json';
import internalDocument from './internal-openapi.json';

/** The public API's OpenAPI document, as served: no internal route, nothing of the admin token. */
export const openApiDocument: Readonly<Record<string, unknown>> = document;

/** The internal routes' OpenAPI document, as served on the admin side. */
export const internalOpenApiDocument: Readonly<Record<string, unknown>> = internalDocument;

/** The documents change only with a deploy: clients may keep them five minutes. */
const CACHE_SECONDS = 300;

/** Where the router serves the public document, relative to where it is mounted. */
export const OPENAPI_PATH = '/openapi.json';

/** The internal document's path under `/internal/v1`. */
export const INTERNAL_OPENAPI_PATH = '/openapi.json';

/** One GET route answering `body` (serialised once); other methods answer 405 as every declared path does. */
function serve(router: Router, path: string, doc: Readonly<Record<string, unknown>>, cacheControl: string): void {
  const body = JSON.stringify(doc);
  route(router, path, {
    get: (_req, res) => {
      res.setHeader('Cache-Control', cacheControl);
      res.type('application/json').send(body);
    },
  });
}

/**
 * `GET /openapi.json`: the OpenAPI 3.1 document of the public API, without a token. Mounted outside
 * `/api/v1`, where the contract wants a bearer token on every route.
 */
export function openApiRouter(): Router {
  const router = Router({ caseSensitive: true, strict: false });
  serve(router, OPENAPI_PATH, document, `public, max-age=${CACHE_SECONDS}`);
  return router;
}

/**
 * `GET /internal/v1/openapi.json` on the router of the internal routes, behind their guard: the
 * operator's document stays on the operator's side of the door.
 */
export function mountInternalOpenApi(internal: Router): void {
  serve(internal, INTERNAL_OPENAPI_PATH, internalDocument, `private, max-age=${CACHE_SECONDS}`);
}
