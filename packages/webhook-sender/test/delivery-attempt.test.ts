import { randomUUID } from 'node:crypto';
import { attemptDelivery, createWebhookSender, type WebhookSender } from '@svc/webhook-sender';
import { sign, verify } from '@svc/webhook-signature';
import { startReceiver, type Receiver } from '../../../test/support/https-receiver';

/** One attempt as a receiver sees it: the exact body, the exact headers, a signature over the raw bytes. */

const SECRET = 'whsec_' + 'k'.repeat(43);
const ISO_8601 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

let receiver: Receiver;
let sender: WebhookSender;

beforeAll(async () => {
  receiver = await startReceiver();
  sender = createWebhookSender({ hostMap: 'receiver.test=127.0.0.1', allowCidrs: '127.0.0.0/8', timeoutMs: 2000 });
});

afterAll(async () => {
  await sender.close();
  await receiver.close();
});

beforeEach(() => receiver.reset());

it('sends exactly {event, timestamp, webhookId, data} with the contract headers, signed over the raw bytes', async () => {
  const deliveryId = randomUUID();
  const data = { numeroGuia: 'GT-000123', estado: 'ENTREGADO', fechaEntrega: '2026-11-22T10:00:00.000Z' };
  const before = Date.now();
  const outcome = await attemptDelivery(sender, { url: receiver.url('/hook'), secret: SECRET, deliveryId, event: 'GUIA_ENTREGADA', data });
  const after = Date.now();

  expect(outcome).toMatchObject({ ok: true, statusCode: 200, result: '2xx' });
  expect(outcome.timestamp).toMatch(ISO_8601);
  const [request] = await receiver.waitFor(1);
  if (request === undefined) throw new Error('no request');

  const text = request.rawBody.toString('utf8');
  const body = JSON.parse(text) as Record<string, unknown>;
  expect(Object.keys(body)).toEqual(['event', 'timestamp', 'webhookId', 'data']);
  expect(body).toEqual({ event: 'GUIA_ENTREGADA', timestamp: outcome.timestamp, webhookId: deliveryId, data });
  const sentAt = Date.parse(outcome.timestamp);
  expect(sentAt).toBeGreaterThanOrEqual(before);
  expect(sentAt).toBeLessThanOrEqual(after);

  expect(request.method).toBe('POST');
  expect(request.path).toBe('/hook');
  expect(request.headers['content-type']).toBe('application/json');
  expect(request.headers['x-svc-event']).toBe('GUIA_ENTREGADA');
  expect(request.headers['x-svc-timestamp']).toBe(outcome.timestamp);
  expect(request.headers['x-request-id']).toBe(deliveryId);
  expect(request.headers['user-agent']).toBe('SVC-Webhooks/1.0');
  expect(request.headers['x-svc-signature']).toMatch(/^sha256=[0-9a-f]{64}$/);
  expect(request.headers['x-svc-signature']).toBe(sign(request.rawBody, SECRET));
  expect(Number(request.headers['content-length'])).toBe(request.rawBody.length);

  expect(verify(request.rawBody, request.headers['x-svc-signature'], SECRET)).toBe(true);
  expect(verify(text, request.headers['x-svc-signature'], SECRET)).toBe(true);
  expect(verify(request.rawBody, request.headers['x-svc-signature'], SECRET + 'x')).toBe(false);
  expect(verify(request.rawBody, request.headers['x-svc-signature'], 'another-secret')).toBe(false);
  for (const index of [0, Math.floor(request.rawBody.length / 2), request.rawBody.length - 1]) {
    const tampered = Buffer.from(request.rawBody);
    tampered[index] = tampered[index]! ^ 0x01;
    expect(verify(tampered, request.headers['x-svc-signature'], SECRET)).toBe(false);
  }
});

it('multi-byte text in data is signed and sent as the same UTF-8 bytes', async () => {
  const deliveryId = randomUUID();
  const data = { numeroGuia: 'GT-ñ€😀', estado: 'DEVOLUCION', motivo: 'Dirección "incorrecta" \\ ✓' };
  const outcome = await attemptDelivery(sender, { url: receiver.url('/utf8'), secret: SECRET, deliveryId, event: 'GUIA_DEVOLUCION', data });
  expect(outcome.ok).toBe(true);
  const [request] = await receiver.waitFor(1);
  expect(verify(request!.rawBody, request!.headers['x-svc-signature'], SECRET)).toBe(true);
  expect(JSON.parse(request!.rawBody.toString('utf8'))).toMatchObject({ data });
});

it('a PING carries an empty data object', async () => {
  const deliveryId = randomUUID();
  const outcome = await attemptDelivery(sender, { url: receiver.url('/ping'), secret: SECRET, deliveryId, event: 'PING', data: {} });
  expect(outcome.ok).toBe(true);
  const [request] = await receiver.waitFor(1);
  expect(request!.rawBody.toString('utf8')).toBe(
    `{"event":"PING","timestamp":"${outcome.timestamp}","webhookId":"${deliveryId}","data":{}}`,
  );
  expect(request!.headers['x-svc-event']).toBe('PING');
});

it('each attempt has its own timestamp and signature, and the same delivery id', async () => {
  const deliveryId = randomUUID();
  receiver.respond('/retry', [{ status: 503 }, { status: 200 }]);
  const input = { url: receiver.url('/retry'), secret: SECRET, deliveryId, event: 'GUIA_CREADA' as const, data: { numeroGuia: 'GT-1', estado: 'CREADA' } };
  const first = await attemptDelivery(sender, input);
  await new Promise((r) => setTimeout(r, 5));
  const second = await attemptDelivery(sender, input);
  expect(first).toMatchObject({ ok: false, statusCode: 503, result: '5xx' });
  expect(second).toMatchObject({ ok: true, statusCode: 200, result: '2xx' });
  expect(second.timestamp > first.timestamp).toBe(true);

  const requests = await receiver.waitFor(2);
  expect(requests.map((r) => r.headers['x-request-id'])).toEqual([deliveryId, deliveryId]);
  expect(requests.map((r) => r.headers['x-svc-timestamp'])).toEqual([first.timestamp, second.timestamp]);
  expect(requests[0]!.headers['x-svc-signature']).not.toBe(requests[1]!.headers['x-svc-signature']);
  for (const r of requests) {
    expect(verify(r.rawBody, r.headers['x-svc-signature'], SECRET)).toBe(true);
    expect(JSON.parse(r.rawBody.toString('utf8'))).toMatchObject({ webhookId: deliveryId, timestamp: r.headers['x-svc-timestamp'] });
  }
});

it('a failed attempt still reports its timestamp and never throws', async () => {
  const strict = createWebhookSender({ hostMap: 'receiver.test=127.0.0.1', allowCidrs: '', timeoutMs: 2000 });
  try {
    const outcome = await attemptDelivery(strict, { url: receiver.url('/hook'), secret: SECRET, deliveryId: randomUUID(), event: 'PING', data: {} });
    expect(outcome).toMatchObject({ ok: false, statusCode: 0, result: 'blocked' });
    expect(outcome.timestamp).toMatch(ISO_8601);
    expect(receiver.requests).toHaveLength(0);
  } finally {
    await strict.close();
  }
});
