import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import request from 'supertest';
import { attemptDelivery, createWebhookSender, type WebhookSender } from '@svc/webhook-sender';
import { sign } from '@svc/webhook-signature';
// The dispatcher's own body and headers of an attempt (not exported by the package's index).
import { deliveryBody, deliveryHeaders } from '../../webhook-sender/src/delivery.attempt';
import { TEST_CERT_DIR } from '../../../test/support/https-receiver';
import type { DeliveryPayload } from '@svc/webhook-signature';
import { createWebhookApp } from './express-example';

/**
 * The README's express example, run as written against deliveries made by the SVC sender itself
 * (attemptDelivery: the dispatcher's and the PING's code path) over real TLS.
 */

const SECRET = 'whsec_' + 'r'.repeat(43);
/** The fields of an attempt besides the body: no rotation, live, the event's id as `webhook-id`. */
const plain = (eventId: string) => ({ eventId, previousSecret: null, sequence: null, mode: 'live' as const });
/** A PING's: its own id names it. */
const ping = () => {
  const deliveryId = randomUUID();
  return { deliveryId, ...plain(deliveryId), event: 'PING' };
};

it('the README shows test/express-example.ts verbatim', () => {
  const readme = readFileSync(join(__dirname, '../README.md'), 'utf8');
  const example = readFileSync(join(__dirname, 'express-example.ts'), 'utf8');
  const blocks = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]);
  expect(blocks).toContain(example);
});

describe('the example receiver', () => {
  const handled: DeliveryPayload[] = [];
  const app = createWebhookApp(SECRET, (delivery) => {
    handled.push(delivery);
  });
  let server: Server;
  let port: number;
  let sender: WebhookSender;
  const url = (): string => `https://receiver.test:${port}/webhooks/svc`;

  const handledSoon = async (count: number): Promise<void> => {
    for (let i = 0; i < 100 && handled.length < count; i++) await new Promise((r) => setTimeout(r, 10));
  };

  beforeAll(async () => {
    server = createServer(
      { cert: readFileSync(join(TEST_CERT_DIR, 'receiver.pem')), key: readFileSync(join(TEST_CERT_DIR, 'receiver.key')) },
      app,
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
    sender = createWebhookSender({ hostMap: 'receiver.test=127.0.0.1', allowCidrs: '127.0.0.0/8', timeoutMs: 3000 });
  });

  afterAll(async () => {
    await sender.close();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  beforeEach(() => {
    handled.length = 0;
  });

  it('accepts a delivery signed by the sender, answers 200 and handles it once', async () => {
    const deliveryId = randomUUID();
    const data = { numeroGuia: 'GT-77', estado: 'ENTREGADO', fechaEntrega: '2026-11-22T12:00:00.000Z' };
    const outcome = await attemptDelivery(sender, { url: url(), secret: SECRET, deliveryId, ...plain(deliveryId), event: 'GUIA_ENTREGADA', data });
    expect(outcome).toMatchObject({ ok: true, statusCode: 200, result: '2xx' });
    await handledSoon(1);
    expect(handled).toEqual([{ event: 'GUIA_ENTREGADA', timestamp: outcome.timestamp, webhookId: deliveryId, data }]);
  });

  it('answers a retry of the same delivery 200 again but handles it only once', async () => {
    const deliveryId = randomUUID();
    const input = { url: url(), secret: SECRET, deliveryId, ...plain(deliveryId), event: 'GUIA_EN_RUTA' as const, data: { numeroGuia: 'GT-8', estado: 'EN_RUTA' } };
    const first = await attemptDelivery(sender, input);
    const second = await attemptDelivery(sender, input);
    expect([first.statusCode, second.statusCode]).toEqual([200, 200]);
    await handledSoon(1);
    await new Promise((r) => setTimeout(r, 50));
    expect(handled.map((d) => d.webhookId)).toEqual([deliveryId]);
  });

  it('during a rotation, a receiver on the old secret, on the new one or on both accepts the delivery', async () => {
    const next = 'whsec_' + 's'.repeat(43);
    const onBoth = createWebhookApp([next, SECRET], () => undefined);
    const onNew = createWebhookApp(next, () => undefined);
    const deliveryId = randomUUID();
    const previousSecret = { secret: SECRET, expiresAt: new Date(Date.now() + 3_600_000) };
    const input = { ...plain(deliveryId), secret: next, previousSecret, deliveryId, event: 'PING', data: {} };
    const outcome = await attemptDelivery(sender, { ...input, url: url() });
    expect(outcome.statusCode).toBe(200); // `app`, which has only the old secret: X-SVC-Signature-Anterior
    const at = new Date();
    const raw = deliveryBody(input, at.toISOString());
    const sent = { raw, headers: deliveryHeaders(raw, input, at) };
    expect(sent.headers).toHaveProperty('x-svc-signature-anterior');
    for (const receiver of [onBoth, onNew]) {
      const response = await request(receiver).post('/webhooks/svc').set(sent.headers).send(sent.raw);
      expect(response.status).toBe(200);
    }
  });

  it('accepts a PING with empty data', async () => {
    const outcome = await attemptDelivery(sender, { url: url(), secret: SECRET, ...ping(), data: {} });
    expect(outcome.statusCode).toBe(200);
    await handledSoon(1);
    expect(handled[0]).toMatchObject({ event: 'PING', data: {} });
  });

  it('answers 401 to a delivery signed with another secret, handling nothing', async () => {
    const outcome = await attemptDelivery(sender, {
      url: url(),
      secret: 'not-the-receivers-secret',
      ...ping(),
      event: 'GUIA_CREADA',
      data: { numeroGuia: 'GT-9', estado: 'CREADA' },
    });
    expect(outcome).toMatchObject({ ok: false, statusCode: 401, result: '4xx' });
    await new Promise((r) => setTimeout(r, 50));
    expect(handled).toHaveLength(0);
  });

  describe('tampered requests', () => {
    const body = JSON.stringify({ event: 'GUIA_CREADA', timestamp: new Date().toISOString(), webhookId: randomUUID(), data: { numeroGuia: 'GT-1', estado: 'CREADA' } });

    const stale = JSON.stringify({ event: 'GUIA_CREADA', timestamp: new Date(Date.now() - 10 * 60_000).toISOString(), webhookId: randomUUID(), data: {} });

    it.each<[string, string, Record<string, string>, string]>([
      ['no signature header', body, {}, 'missing_signature'],
      ['a malformed signature header', body, { 'X-SVC-Signature': 'sha256=nothex' }, 'invalid_signature'],
      ['one byte of the body changed', body.replace('GT-1', 'GT-2'), { 'X-SVC-Signature': sign(body, SECRET) }, 'invalid_signature'],
      ['the same JSON re-serialised', JSON.stringify(JSON.parse(body), null, 1), { 'X-SVC-Signature': sign(body, SECRET) }, 'invalid_signature'],
      ['a replay of a delivery signed 10 minutes ago', stale, { 'X-SVC-Signature': sign(stale, SECRET) }, 'timestamp_out_of_tolerance'],
    ])('401 for %s', async (_what, sent, headers, reason) => {
      const response = await request(app).post('/webhooks/svc').set('Content-Type', 'application/json').set(headers).send(sent);
      expect(response.status).toBe(401);
      expect(response.body).toEqual({ error: 'invalid signature', reason });
      await new Promise((r) => setTimeout(r, 20));
      expect(handled).toHaveLength(0);
    });

    it('200 for the untouched request (control)', async () => {
      const response = await request(app)
        .post('/webhooks/svc')
        .set('Content-Type', 'application/json')
        .set('X-SVC-Signature', sign(body, SECRET))
        .send(body);
      expect(response.status).toBe(200);
      await handledSoon(1);
      expect(handled).toHaveLength(1);
    });
  });
});
