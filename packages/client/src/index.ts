// @svc/client: the courier API's typed client. The types are generated (src/schema.generated.ts, by
// openapi-typescript from the OpenAPI document); the calls are openapi-fetch's, typed by them.
import createClient, { type Client, type ClientOptions } from 'openapi-fetch';
import type { components, paths } from './schema.generated';

export type { components, operations, paths, webhooks } from './schema.generated';

/** The body of any delivery a webhook receives, told apart by `event`. */
export type SvcEvent = components['schemas']['EventPayload'];

export type SvcClient = Client<paths>;

export interface SvcClientOptions extends Omit<ClientOptions, 'baseUrl'> {
  /** Where the API is: `https://api.example.com` (no `/api/v1`: the paths carry it). */
  baseUrl: string;
  /** A `svc_live_...` or `svc_test_...` token, sent as `Authorization: Bearer <token>`. */
  token: string;
}

/**
 * A client for every path of the public API: `client.GET('/api/v1/guias/{numeroGuia}/tracking', {
 * params: { path: { numeroGuia } } })` answers `{ data, error, response }`, typed by the document.
 */
export function createSvcClient({ baseUrl, token, headers, ...options }: SvcClientOptions): SvcClient {
  return createClient<paths>({ ...options, baseUrl, headers: { ...headers, Authorization: `Bearer ${token}` } });
}
