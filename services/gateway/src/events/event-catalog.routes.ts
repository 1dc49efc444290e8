import type { Router } from 'express';
import { CATALOG_SCHEMA_DIALECT, EVENT_CATALOG } from '@svc/contracts';
import { route } from '../http/route-table';

/**
 * The catalog as served: each schema a standalone JSON Schema document (its `$schema` stated; the
 * OpenAPI document states the dialect once instead). Serialised once: it changes only with a deploy.
 * Nothing in it is secret or the caller's, but it stays under the API's `no-store`, like every
 * `/api/v1` answer, rather than being the one cacheable route behind a bearer token.
 */
const body = JSON.stringify({
  success: true,
  data: EVENT_CATALOG.map((e) => ({ ...e, schema: { $schema: CATALOG_SCHEMA_DIALECT, ...e.schema } })),
});

/** `GET /api/v1/eventos`: every event a webhook can receive, with its schema and an example (any token). */
export function mountEventCatalogRoutes(router: Router): void {
  route(router, '/eventos', {
    get: (_req, res) => {
      res.type('application/json').send(body);
    },
  });
}
