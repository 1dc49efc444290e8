import { randomUUID } from 'node:crypto';
import { attemptDelivery, createWebhookSender, type AttemptInput, type WebhookSender } from '@svc/webhook-sender';
import { sign, signStandard, standardSecret, verify } from '@svc/webhook-signature';
import { startReceiver, type Receiver } from '../../../test/support/https-receiver';
import { acceptedByStandard, verifyStandard } from '../../../test/support/standard-webhooks';

/** One attempt as a receiver sees it: the exact body, the exact headers, a signature over the raw bytes. */

// As issued: `whsec_` + base64 of 32 bytes (these ones spell '+' and '/', the standard alphabet's own).
const SECRET = 'whsec_' + Buffer.from('fbff'.repeat(16), 'hex').toString('base64');
const OLD_SECRET = 'whsec_' + Buffer.from('0123456789abcdef'.repeat(4), 'hex').toString('base64');
const ISO_8601 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** An attempt's fields besides the body: no rotation, live, a shipment event's sequence. */
function fields(deliveryId: string, eventId = randomUUID()): Pick<AttemptInput, 'deliveryId' | 'eventId' | 'previousSecret' | 'sequence' | 'mode'> {
  return { deliveryId, eventId, previousSecret: null, sequence: 3, mode: 'live' };
}

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
  const eventId = randomUUID();
  const outcome = await attemptDelivery(sender, { url: receiver.url('/hook'), secret: SECRET, ...fields(deliveryId, eventId), event: 'GUIA_ENTREGADA', data });
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

  // Standard Webhooks: the event's id, the attempt's Unix seconds, one v1 signature; the mode and sequence.
  expect(request.headers['webhook-id']).toBe(eventId);
  expect(request.headers['webhook-timestamp']).toBe(String(Math.floor(sentAt / 1000)));
  expect(request.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
  expect(request.headers['x-svc-modo']).toBe('live');
  expect(request.headers['x-svc-secuencia']).toBe('3');
  expect(request.headers['x-svc-signature-anterior']).toBeUndefined();
  expect(verifyStandard(request, SECRET)).toEqual(body);
  expect(acceptedByStandard(request, OLD_SECRET)).toBe(false);
  const tampered = Buffer.from(request.rawBody);
  tampered[5] = tampered[5]! ^ 0x01;
  expect(acceptedByStandard({ ...request, rawBody: tampered }, SECRET)).toBe(false);
  expect(acceptedByStandard({ ...request, headers: { ...request.headers, 'webhook-id': randomUUID() } }, SECRET)).toBe(false);
});

it('during a rotation overlap signs with both secrets: X-SVC-Signature-Anterior, and a second webhook-signature after the current one', async () => {
  const deliveryId = randomUUID();
  const previousSecret = { secret: OLD_SECRET, expiresAt: new Date(Date.now() + 3600_000) };
  const data = { numeroGuia: 'GT-2', estado: 'EN_RUTA' };
  await attemptDelivery(sender, { url: receiver.url('/rotating'), secret: SECRET, ...fields(deliveryId), previousSecret, event: 'GUIA_EN_RUTA', data });
  const [request] = await receiver.waitFor(1);
  expect(request!.headers['x-svc-signature']).toBe(sign(request!.rawBody, SECRET));
  expect(request!.headers['x-svc-signature-anterior']).toBe(sign(request!.rawBody, OLD_SECRET));
  expect(verify(request!.rawBody, request!.headers['x-svc-signature-anterior'], OLD_SECRET)).toBe(true);
  const [current, previous, ...more] = String(request!.headers['webhook-signature']).split(' ');
  expect(more).toEqual([]);
  const id = String(request!.headers['webhook-id']);
  const seconds = Number(request!.headers['webhook-timestamp']);
  expect(current).toBe(signStandard(id, seconds, request!.rawBody, SECRET));
  expect(previous).toBe(signStandard(id, seconds, request!.rawBody, OLD_SECRET));
  // A receiver on either secret accepts it.
  expect(acceptedByStandard(request!, SECRET)).toBe(true);
  expect(acceptedByStandard(request!, OLD_SECRET)).toBe(true);
});

it('once the overlap has ended the previous secret signs nothing', async () => {
  const previousSecret = { secret: OLD_SECRET, expiresAt: new Date(Date.now() - 1) };
  await attemptDelivery(sender, { url: receiver.url('/ended'), secret: SECRET, ...fields(randomUUID()), previousSecret, event: 'GUIA_EN_RUTA', data: { numeroGuia: 'GT-3', estado: 'EN_RUTA' } });
  const [request] = await receiver.waitFor(1);
  expect(request!.headers['x-svc-signature-anterior']).toBeUndefined();
  expect(String(request!.headers['webhook-signature']).split(' ')).toHaveLength(1);
  expect(acceptedByStandard(request!, SECRET)).toBe(true);
  expect(acceptedByStandard(request!, OLD_SECRET)).toBe(false);
});

it.each([
  // Issued before secrets were standard base64: the key is the bytes the URL-safe base64 decodes to.
  ['a URL-safe whsec_ secret', 'whsec_' + Buffer.from('fbff'.repeat(16), 'hex').toString('base64url')],
  // Any other string: its own bytes, as the package's `format: 'raw'` keys it.
  ['a secret not in whsec_ form', 'a-plain-secret-of-an-older-webhook'],
])('keys webhook-signature for %s as documented, and the standardwebhooks package verifies it', async (_case, secret) => {
  await attemptDelivery(sender, { url: receiver.url('/legacy'), secret, ...fields(randomUUID()), event: 'GUIA_CREADA', data: { numeroGuia: 'GT-4', estado: 'CREADA' } });
  const [request] = await receiver.waitFor(1);
  expect(verify(request!.rawBody, request!.headers['x-svc-signature'], secret)).toBe(true);
  // The secret rewritten as `whsec_` + standard base64 of the same key is what any Standard Webhooks library takes.
  expect(acceptedByStandard(request!, standardSecret(secret))).toBe(true);
  if (!secret.startsWith('whsec_')) expect(acceptedByStandard(request!, secret, { format: 'raw' })).toBe(true);
  else expect(acceptedByStandard(request!, Buffer.from(secret.slice(6), 'base64url'), { format: 'raw' })).toBe(true);
});

it('says the mode it is given, and sends no X-SVC-Secuencia without a sequence', async () => {
  const deliveryId = randomUUID();
  await attemptDelivery(sender, { url: receiver.url('/test-mode'), secret: SECRET, ...fields(deliveryId, deliveryId), sequence: null, mode: 'test', event: 'PING', data: {} });
  const [request] = await receiver.waitFor(1);
  expect(request!.headers['x-svc-modo']).toBe('test');
  expect(request!.headers['x-svc-secuencia']).toBeUndefined();
  expect(request!.headers['webhook-id']).toBe(deliveryId);
  expect(verifyStandard(request!, SECRET)).toMatchObject({ event: 'PING', webhookId: deliveryId });
});

it('multi-byte text in data is signed and sent as the same UTF-8 bytes', async () => {
  const deliveryId = randomUUID();
  const data = { numeroGuia: 'GT-ñ€😀', estado: 'DEVOLUCION', motivo: 'Dirección "incorrecta" \\ ✓' };
  const outcome = await attemptDelivery(sender, { url: receiver.url('/utf8'), secret: SECRET, ...fields(deliveryId), event: 'GUIA_DEVOLUCION', data });
  expect(outcome.ok).toBe(true);
  const [request] = await receiver.waitFor(1);
  expect(verify(request!.rawBody, request!.headers['x-svc-signature'], SECRET)).toBe(true);
  expect(acceptedByStandard(request!, SECRET)).toBe(true);
  expect(JSON.parse(request!.rawBody.toString('utf8'))).toMatchObject({ data });
});

it('a PING carries an empty data object', async () => {
  const deliveryId = randomUUID();
  const outcome = await attemptDelivery(sender, { url: receiver.url('/ping'), secret: SECRET, ...fields(deliveryId, deliveryId), sequence: null, event: 'PING', data: {} });
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
  const input = { url: receiver.url('/retry'), secret: SECRET, ...fields(deliveryId), event: 'GUIA_CREADA' as const, data: { numeroGuia: 'GT-1', estado: 'CREADA' } };
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
  // The same webhook-id and sequence on every attempt; each its own webhook-timestamp and signature.
  expect(requests.map((r) => r.headers['webhook-id'])).toEqual([input.eventId, input.eventId]);
  expect(requests.map((r) => r.headers['x-svc-secuencia'])).toEqual(['3', '3']);
  expect(requests[0]!.headers['webhook-signature']).not.toBe(requests[1]!.headers['webhook-signature']);
  for (const r of requests) {
    expect(verify(r.rawBody, r.headers['x-svc-signature'], SECRET)).toBe(true);
    expect(acceptedByStandard(r, SECRET)).toBe(true);
    expect(JSON.parse(r.rawBody.toString('utf8'))).toMatchObject({ webhookId: deliveryId, timestamp: r.headers['x-svc-timestamp'] });
  }
});

it('a failed attempt still reports its timestamp and never throws', async () => {
  const strict = createWebhookSender({ hostMap: 'receiver.test=127.0.0.1', allowCidrs: '', timeoutMs: 2000 });
  try {
    const outcome = await attemptDelivery(strict, { url: receiver.url('/hook'), secret: SECRET, ...fields(randomUUID()), event: 'PING', data: {} });
    expect(outcome).toMatchObject({ ok: false, statusCode: 0, result: 'blocked' });
    expect(outcome.timestamp).toMatch(ISO_8601);
    expect(receiver.requests).toHaveLength(0);
  } finally {
    await strict.close();
  }
});
