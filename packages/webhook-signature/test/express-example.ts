import express from 'express';
import { verifyDelivery, type DeliveryPayload } from '@svc/webhook-signature';

/**
 * `secrets`: the webhook's secret, or `[current, previous]` while you deploy a rotated secret.
 * `handle` runs after the answer, once per delivery id.
 */
export function createWebhookApp(secrets: string | string[], handle: (delivery: DeliveryPayload) => Promise<void> | void): express.Express {
  const seen = new Set<string>(); // with several processes, keep this in a shared store (Redis, a table)
  const app = express();

  // express.raw keeps the exact bytes received: the signature covers them, not re-serialised JSON.
  app.post('/webhooks/svc', express.raw({ type: 'application/json' }), (req, res) => {
    const rawBody: Buffer = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    const result = verifyDelivery({ rawBody, headers: req.headers, secrets });
    if (!result.ok) {
      res.status(401).json({ error: 'invalid signature', reason: result.reason });
      return;
    }
    const delivery = result.payload;

    // Answer at once (the sender waits 5 seconds at most), then do the work.
    res.status(200).json({ received: true });

    // A retry carries the same webhookId: process each delivery once.
    if (seen.has(delivery.webhookId)) return;
    seen.add(delivery.webhookId);
    setImmediate(() => {
      Promise.resolve(handle(delivery)).catch((err: unknown) => console.error('webhook handling failed', err));
    });
  });

  return app;
}
