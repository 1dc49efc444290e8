import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer } from 'node:https';
import { join } from 'node:path';
import { DEFAULT_TOLERANCE_SECONDS, verifyDelivery, type VerifyFailureReason } from '@svc/webhook-signature';

/**
 * A small HTTPS webhook receiver: verifies every delivery with @svc/webhook-signature and logs one
 * line per delivery, saying which signature matched (the webhook's current or previous secret) and
 * which of its own secrets verified it. Run it from the repository's root (README.md, "Quick start"):
 *
 *   WEBHOOK_SECRET=whsec_... node --import tsx examples/receiver/receiver.ts
 *
 * Settings (environment):
 *   WEBHOOK_SECRET            the webhook's secret (required)
 *   WEBHOOK_SECRET_PREVIOUS   the secret before a rotation, while you switch over (optional)
 *   RECEIVER_PORT             default 8443
 *   RECEIVER_HOST             default 127.0.0.1
 *   RECEIVER_CERT, RECEIVER_KEY  default .test-certs/receiver.pem and .key (node scripts/test-certs.mjs)
 *   WEBHOOK_TOLERANCE_SECONDS how old (or early) a signed time may be; default 300
 */

const ROOT = join(__dirname, '../..');
const MAX_BODY_BYTES = 1024 * 1024;

function fail(message: string): never {
  console.error(`receiver: ${message}`);
  process.exit(1);
}

const env = process.env;
const secrets = [env.WEBHOOK_SECRET ?? '', env.WEBHOOK_SECRET_PREVIOUS ?? ''].filter((s) => s !== '');
if (!env.WEBHOOK_SECRET) fail('set WEBHOOK_SECRET to the secret shown when the webhook was created');
const port = Number(env.RECEIVER_PORT ?? 8443);
if (!Number.isInteger(port) || port < 0 || port > 65535) fail(`RECEIVER_PORT must be a port number, got ${env.RECEIVER_PORT}`);
const host = env.RECEIVER_HOST ?? '127.0.0.1';
const toleranceSeconds = Number(env.WEBHOOK_TOLERANCE_SECONDS ?? DEFAULT_TOLERANCE_SECONDS);
if (!Number.isFinite(toleranceSeconds) || toleranceSeconds < 0) fail('WEBHOOK_TOLERANCE_SECONDS must be a number of seconds >= 0');
const certFile = env.RECEIVER_CERT ?? join(ROOT, '.test-certs/receiver.pem');
const keyFile = env.RECEIVER_KEY ?? join(ROOT, '.test-certs/receiver.key');

function read(file: string): Buffer {
  try {
    return readFileSync(file);
  } catch {
    return fail(`cannot read ${file}: run \`node scripts/test-certs.mjs\` first (or set RECEIVER_CERT and RECEIVER_KEY)`);
  }
}

/** One header as a single string, for the log. */
function one(req: IncomingMessage, name: string): string {
  const value = req.headers[name];
  return (Array.isArray(value) ? value.join(',') : value) ?? '-';
}

/** 401 for anything about the signature or its time; 400 for a signed body that is not a delivery. */
const STATUS: Record<VerifyFailureReason, number> = {
  no_secret: 401,
  missing_signature: 401,
  invalid_signature: 401,
  timestamp_out_of_tolerance: 401,
  invalid_payload: 400,
};

function answer(res: ServerResponse, status: number, body: object): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

/**
 * Which of the sender's signatures matched: `current` (X-SVC-Signature, or the first entry of
 * webhook-signature), keyed with the webhook's current secret, or `previous` (X-SVC-Signature-Anterior,
 * or the second entry), keyed with the secret it had before a rotation, sent only during the overlap.
 * Verifying again with the previous-secret signatures left out tells them apart through the kit's
 * own constant-time checks; a receiver that logs `previous` is still on the old secret.
 */
function signatureMatched(req: IncomingMessage, rawBody: Buffer, secret: string, now: number): 'current' | 'previous' {
  const headers = { ...req.headers };
  delete headers['x-svc-signature-anterior'];
  const standard = headers['webhook-signature'];
  if (typeof standard === 'string') headers['webhook-signature'] = standard.split(' ')[0];
  return verifyDelivery({ rawBody, headers, secrets: [secret], toleranceSeconds, now }).ok ? 'current' : 'previous';
}

function handle(req: IncomingMessage, res: ServerResponse, rawBody: Buffer): void {
  const now = Date.now();
  const result = verifyDelivery({ rawBody, headers: req.headers, secrets, toleranceSeconds, now });
  // eventId: the `webhook-id` header; deliveryId: the payload's `webhookId` (docs/integrators.md, Ids).
  // X-SVC-Modo: `live`, or `test` for sandbox events; X-SVC-Secuencia: the event's place in its shipment's history.
  const eventId = `eventId=${one(req, 'webhook-id')}`;
  const context = `modo=${one(req, 'x-svc-modo')} secuencia=${one(req, 'x-svc-secuencia')}`;
  if (result.ok) {
    // Which of this receiver's secrets matched (during a rotation, either may).
    const secret = result.secretIndex === 0 ? 'WEBHOOK_SECRET' : 'WEBHOOK_SECRET_PREVIOUS';
    const signature = signatureMatched(req, rawBody, secrets[result.secretIndex] ?? '', now);
    console.log(
      `${new Date(now).toISOString()} VALID ${result.event} ${eventId} deliveryId=${result.payload.webhookId} ${context} scheme=${result.scheme} signature=${signature} secret=${secret}`,
    );
    answer(res, 200, { received: true });
    return;
  }
  // The event header is not signed: logged only to help find the delivery.
  console.log(`${new Date().toISOString()} INVALID ${one(req, 'x-svc-event')} ${eventId} ${context} reason=${result.reason}`);
  answer(res, STATUS[result.reason], { error: result.reason });
}

const server = createServer({ cert: read(certFile), key: read(keyFile) }, (req, res) => {
  if (req.method !== 'POST') {
    answer(res, 405, { error: 'POST only' });
    return;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  req.on('data', (chunk: Buffer) => {
    size += chunk.length;
    if (size <= MAX_BODY_BYTES) chunks.push(chunk);
  });
  req.on('end', () => {
    if (size > MAX_BODY_BYTES) {
      console.log(`${new Date().toISOString()} INVALID ${one(req, 'x-svc-event')} reason=body_too_large`);
      answer(res, 413, { error: 'body too large' });
      return;
    }
    // The exact bytes received: the signatures cover them, not re-serialised JSON.
    handle(req, res, Buffer.concat(chunks));
  });
});
server.on('tlsClientError', () => undefined);

server.listen(port, host, () => {
  const address = server.address();
  const bound = typeof address === 'object' && address !== null ? address.port : port;
  const rotation = secrets.length > 1 ? ' and WEBHOOK_SECRET_PREVIOUS' : '';
  console.log(`receiver listening on https://receiver.test:${bound} (${host}:${bound}), verifying with WEBHOOK_SECRET${rotation}, tolerance ${toleranceSeconds}s`);
});

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  });
}
