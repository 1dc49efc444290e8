import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer as createHttpsServer, type Server } from 'node:https';
import { createServer as createTcpServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createWebhookSender, MAX_RESPONSE_LENGTH, type WebhookSender } from '@svc/webhook-sender';
import { startReceiver, type Receiver } from '../../../test/support/https-receiver';

/** Each reason a delivery log gives, produced by the real failure. */

const HOST_MAP = 'receiver.test=127.0.0.1,stranger.test=127.0.0.1,private.test=10.0.0.7';
const JSON_HEADERS = { 'content-type': 'application/json' };

let receiver: Receiver;
let sender: WebhookSender;
let stranger: Server;
let certDir: string;

beforeAll(async () => {
  receiver = await startReceiver();
  sender = createWebhookSender({ hostMap: HOST_MAP, allowCidrs: '127.0.0.0/8', timeoutMs: 1000 });
  // A receiver whose certificate no trusted authority signed (self-signed, right name).
  certDir = mkdtempSync(join(tmpdir(), 'svc-untrusted-'));
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=stranger.test',
    '-addext', 'subjectAltName=DNS:stranger.test', '-keyout', join(certDir, 'key.pem'), '-out', join(certDir, 'cert.pem'),
  ], { stdio: 'ignore' });
  stranger = createHttpsServer({ key: readFileSync(join(certDir, 'key.pem')), cert: readFileSync(join(certDir, 'cert.pem')) }, (_req, res) => res.end('ok'));
  await new Promise<void>((resolve) => stranger.listen(0, '127.0.0.1', resolve));
});

afterAll(async () => {
  await sender.close();
  await receiver.close();
  await new Promise<void>((resolve) => stranger.close(() => resolve()));
  rmSync(certDir, { recursive: true, force: true });
});

async function closedPort(): Promise<number> {
  const server = createTcpServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('why an attempt failed', () => {
  it('TLS: a certificate no trusted authority signed', async () => {
    const { port } = stranger.address() as AddressInfo;
    const outcome = await sender.send(`https://stranger.test:${port}/hook`, '{}', JSON_HEADERS);
    expect(outcome).toMatchObject({ ok: false, statusCode: 0, error: 'TLS', response: null });
    expect(outcome.message).toMatch(/self[- ]signed/i);
  });

  it('CONNECTION: nothing listens on the port', async () => {
    const outcome = await sender.send(`https://receiver.test:${await closedPort()}/hook`, '{}', JSON_HEADERS);
    expect(outcome).toMatchObject({ ok: false, statusCode: 0, error: 'CONNECTION', response: null });
    expect(outcome.message).toMatch(/ECONNREFUSED/);
  });

  it('HTTP_STATUS: a 500, its body read back (the first 1024 characters)', async () => {
    receiver.respond('/boom', { status: 500, body: 'database is on fire' });
    const outcome = await sender.send(receiver.url('/boom'), '{}', JSON_HEADERS);
    expect(outcome).toMatchObject({
      ok: false,
      statusCode: 500,
      error: 'HTTP_STATUS',
      message: 'the receiver answered 500 Internal Server Error',
      response: 'database is on fire',
    });
    receiver.respond('/long', { status: 400, body: 'ñ'.repeat(3000) });
    const long = await sender.send(receiver.url('/long'), '{}', JSON_HEADERS);
    expect(long.response).toBe('ñ'.repeat(MAX_RESPONSE_LENGTH));
  });

  it('a success keeps its answer too, and no reason', async () => {
    receiver.respond('/fine', { status: 200, body: '{"recibido":true}' });
    expect(await sender.send(receiver.url('/fine'), '{}', JSON_HEADERS)).toMatchObject({
      ok: true,
      error: null,
      message: null,
      response: '{"recibido":true}',
    });
  });

  it('BLOCKED_ADDRESS: the name resolves to a private address, said without the address or its range', async () => {
    const outcome = await sender.send('https://private.test/hook', '{}', JSON_HEADERS);
    expect(outcome).toMatchObject({ ok: false, statusCode: 0, error: 'BLOCKED_ADDRESS', response: null });
    expect(outcome.message).toBe('private.test resolves to a non-public address');
  });

  it('BLOCKED_ADDRESS: the same words whatever the range, never the address', async () => {
    const ranges: Array<[host: string, address: string]> = [
      ['loopback.test', '127.0.0.1'],
      ['linklocal.test', '169.254.169.254'],
      ['cgnat.test', '100.64.0.1'],
      ['ula.test', 'fd00::1'],
      ['mapped.test', '::ffff:192.168.1.1'],
      ['multicast.test', '224.0.0.1'],
    ];
    const strict = createWebhookSender({ hostMap: ranges.map(([h, a]) => `${h}=${a}`).join(','), allowCidrs: '', timeoutMs: 1000 });
    try {
      for (const [host, address] of ranges) {
        const outcome = await strict.send(`https://${host}/hook`, '{}', JSON_HEADERS);
        expect(outcome).toMatchObject({ error: 'BLOCKED_ADDRESS', message: `${host} resolves to a non-public address` });
        expect(outcome.message).not.toContain(address);
      }
      // An IP literal is the tenant's own text; still no range named.
      const literal = await strict.send('https://10.1.2.3/hook', '{}', JSON_HEADERS);
      expect(literal).toMatchObject({ error: 'BLOCKED_ADDRESS', message: '10.1.2.3 resolves to a non-public address' });
    } finally {
      await strict.close();
    }
  });

  it('TIMEOUT: no answer within the deadline', async () => {
    receiver.respond('/slow', { status: 200, delayMs: 3000 });
    const outcome = await sender.send(receiver.url('/slow'), '{}', JSON_HEADERS);
    expect(outcome).toMatchObject({ ok: false, statusCode: 0, error: 'TIMEOUT', message: 'no answer within 1 s', response: null });
  });

  it('DNS: a name that does not resolve', async () => {
    const outcome = await sender.send('https://no-such-host.invalid/hook', '{}', JSON_HEADERS);
    expect(outcome).toMatchObject({ ok: false, statusCode: 0, error: 'DNS', response: null });
    expect(outcome.message).toMatch(/^cannot resolve no-such-host\.invalid: /);
  });

  it('never puts more than 500 characters in a reason', async () => {
    const outcome = await sender.send(`https://receiver.test:${await closedPort()}/${'x'.repeat(2000)}`, '{}', JSON_HEADERS);
    expect(outcome.message!.length).toBeLessThanOrEqual(500);
  });
});
