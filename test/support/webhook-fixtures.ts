import type { Attempt, EntregaDetalle } from '@svc/contracts';
import { bearer, type TestGateway } from './test-gateway';

// Webhooks through the public API, and the delivery log's shapes, for the gateway's and the dispatcher's tests alike.

export type { Attempt, EntregaDetalle };

/** Registers a webhook with the head token; its id and secret (shown once), or throws with the answer. */
export async function createWebhook(gw: TestGateway, token: string, url: string, eventos: string[] = []): Promise<{ id: string; secret: string }> {
  const res = await gw.http.post('/api/v1/webhooks').set('Authorization', bearer(token)).send({ url, eventos });
  if (res.status !== 201) throw new Error(`webhook: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data as { id: string; secret: string };
}
