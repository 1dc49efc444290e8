import express from 'express';
import { verify } from '@svc/webhook-signature';

export interface SvcDelivery {
  event: string;
  timestamp: string;
  webhookId: string;
  data: Record<string, unknown>;
}

export function createWebhookApp(secret: string, handle: (delivery: SvcDelivery) => Promise<void> | void): express.Express {
  const seen = new Set<string>(); // with several processes, keep this in a shared store (Redis, a table)
  const app = express();

  // express.raw keeps the exact bytes received: the signature covers them, not re-serialised JSON.
  app.post('/webhooks/svc', express.raw({ type: 'application/json' }), (req, res) => {
    const rawBody: Buffer = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    if (!verify(rawBody, req.get('X-SVC-Signature'), secret)) {
      res.status(401).json({ error: 'invalid signature' });
      return;
    }
    const delivery = JSON.parse(rawBody.toString('utf8')) as SvcDelivery;

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
