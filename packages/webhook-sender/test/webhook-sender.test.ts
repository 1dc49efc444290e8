import { createServer as createTcpServer, type AddressInfo, type Server as TcpServer, type Socket } from 'node:net';
import { createWebhookSender, type WebhookSender } from '@svc/webhook-sender';
import { startReceiver, type Receiver } from '../../../test/support/https-receiver';

/**
 * The sender against a real HTTPS receiver on loopback, over real TLS with the throwaway CA
 * (NODE_EXTRA_CA_CERTS), reached by name through the host map as the services reach it.
 */

const HOST_MAP = 'receiver.test=127.0.0.1,other.test=127.0.0.1,mismatch.test=127.0.0.1,private.test=10.0.0.1';
const ALLOW_LOOPBACK = '127.0.0.0/8';
const JSON_HEADERS = { 'content-type': 'application/json' };

let receiver: Receiver;
let sender: WebhookSender;

beforeAll(async () => {
  receiver = await startReceiver();
  sender = createWebhookSender({ hostMap: HOST_MAP, allowCidrs: ALLOW_LOOPBACK, timeoutMs: 1000 });
});

afterAll(async () => {
  await sender.close();
  await receiver.close();
});

beforeEach(() => receiver.reset());

describe('status codes', () => {
  it('a 2xx is a success, and the receiver got exactly the bytes and headers sent', async () => {
    receiver.respond('/ok', { status: 204 });
    const body = JSON.stringify({ hello: 'mundo', n: 1, text: 'ñandú €' });
    const outcome = await sender.send(receiver.url('/ok'), body, { ...JSON_HEADERS, 'x-custom': 'v' });
    expect(outcome).toEqual({ ok: true, statusCode: 204, durationMs: expect.any(Number), result: '2xx', error: null, message: null, response: '' });
    expect(Number.isInteger(outcome.durationMs)).toBe(true);
    const [request] = receiver.requestsTo('/ok');
    expect(request?.method).toBe('POST');
    expect(request?.rawBody.equals(Buffer.from(body, 'utf8'))).toBe(true);
    expect(request?.headers['x-custom']).toBe('v');
    expect(request?.headers.host).toBe(`receiver.test:${receiver.port}`);
  });

  it('keeps the query string and drops the fragment', async () => {
    await sender.send(receiver.url('/q?a=1&b=2#frag'), '{}', JSON_HEADERS);
    expect(receiver.requests.map((r) => r.path)).toEqual(['/q?a=1&b=2']);
  });

  it('a 3xx is a failure and the redirect is not followed', async () => {
    receiver.respond('/moved', { status: 302, location: '/elsewhere' });
    receiver.respond('/moved-abs', { status: 307, location: receiver.url('/elsewhere') });
    const relative = await sender.send(receiver.url('/moved'), '{}', JSON_HEADERS);
    const absolute = await sender.send(receiver.url('/moved-abs'), '{}', JSON_HEADERS);
    expect(relative).toMatchObject({ ok: false, statusCode: 302, result: '3xx' });
    expect(absolute).toMatchObject({ ok: false, statusCode: 307, result: '3xx' });
    // Give a follow-up request time to arrive, were one ever sent.
    await new Promise((r) => setTimeout(r, 200));
    expect(receiver.requestsTo('/elsewhere')).toHaveLength(0);
    expect(receiver.requests).toHaveLength(2);
  });

  it.each([
    [400, '4xx'],
    [401, '4xx'],
    [404, '4xx'],
    [410, '4xx'],
    [429, '4xx'],
    [500, '5xx'],
    [502, '5xx'],
    [503, '5xx'],
  ] as const)('%i is a failure (%s) with its status', async (status, result) => {
    receiver.respond('/status', { status, body: 'x'.repeat(1000) });
    const outcome = await sender.send(receiver.url('/status'), '{}', JSON_HEADERS);
    expect(outcome).toMatchObject({ ok: false, statusCode: status, result });
  });

  it('a 2xx with a large body still succeeds (the body is read up to a bound, then dropped)', async () => {
    receiver.respond('/big', { status: 200, body: 'y'.repeat(300 * 1024) });
    const outcome = await sender.send(receiver.url('/big'), '{}', JSON_HEADERS);
    expect(outcome).toMatchObject({ ok: true, statusCode: 200, result: '2xx', response: 'y'.repeat(1024) });
    // The connection stays usable for the next send (a new one if the old was dropped).
    const next = await sender.send(receiver.url('/after-big'), '{}', JSON_HEADERS);
    expect(next.ok).toBe(true);
  });
});

describe('timeouts and network failures', () => {
  it('no answer within timeoutMs is a timeout with status 0, measured over the whole attempt', async () => {
    receiver.respond('/hang', { hang: true });
    const started = Date.now();
    const outcome = await sender.send(receiver.url('/hang'), '{}', JSON_HEADERS);
    const elapsed = Date.now() - started;
    expect(outcome).toMatchObject({ ok: false, statusCode: 0, result: 'timeout' });
    expect(elapsed).toBeGreaterThanOrEqual(950);
    expect(elapsed).toBeLessThan(2500);
    expect(receiver.requestsTo('/hang')).toHaveLength(1);
  });

  it('a 2xx that arrives after timeoutMs is a timeout', async () => {
    receiver.respond('/late', { status: 200, delayMs: 1300 });
    const outcome = await sender.send(receiver.url('/late'), '{}', JSON_HEADERS);
    expect(outcome).toMatchObject({ ok: false, statusCode: 0, result: 'timeout' });
  });

  it('a 2xx whose body does not finish within timeoutMs is a timeout', async () => {
    receiver.respond('/stall', { status: 200, stallBody: true });
    const outcome = await sender.send(receiver.url('/stall'), '{}', JSON_HEADERS);
    expect(outcome).toMatchObject({ ok: false, statusCode: 0, result: 'timeout' });
    expect(outcome.durationMs).toBeGreaterThanOrEqual(950);
  });

  it('a 5xx whose body does not finish keeps its status (the outcome was already known)', async () => {
    receiver.respond('/stall5', { status: 503, stallBody: true });
    const outcome = await sender.send(receiver.url('/stall5'), '{}', JSON_HEADERS);
    expect(outcome).toMatchObject({ ok: false, statusCode: 503, result: '5xx' });
  });

  it('a 2xx whose body breaks off is a network failure: a success counts only once its whole answer came', async () => {
    receiver.respond('/broken', { status: 200, breakBody: true });
    const outcome = await sender.send(receiver.url('/broken'), '{}', JSON_HEADERS);
    expect(outcome).toMatchObject({ ok: false, statusCode: 0, result: 'network', error: 'CONNECTION', message: 'the answer broke off' });
    expect(outcome.durationMs).toBeLessThan(900);
  });

  it('a 5xx whose body breaks off keeps its status and what came of its body', async () => {
    receiver.respond('/broken5', { status: 502, breakBody: true, body: 'upstream gone' });
    const outcome = await sender.send(receiver.url('/broken5'), '{}', JSON_HEADERS);
    expect(outcome).toMatchObject({ ok: false, statusCode: 502, result: '5xx', error: 'HTTP_STATUS', response: 'upstream gone' });
  });

  it('a slow 2xx inside timeoutMs succeeds', async () => {
    receiver.respond('/slowish', { status: 200, delayMs: 300 });
    const outcome = await sender.send(receiver.url('/slowish'), '{}', JSON_HEADERS);
    expect(outcome).toMatchObject({ ok: true, statusCode: 200, result: '2xx' });
    expect(outcome.durationMs).toBeGreaterThanOrEqual(290);
  });

  it('a server that accepts TCP but never completes TLS is a timeout', async () => {
    const held = new Set<Socket>();
    const silent: TcpServer = createTcpServer((socket) => held.add(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const port = (silent.address() as AddressInfo).port;
    try {
      const outcome = await sender.send(`https://receiver.test:${port}/hook`, '{}', JSON_HEADERS);
      expect(outcome).toMatchObject({ ok: false, statusCode: 0, result: 'timeout' });
      expect(held.size).toBe(1);
    } finally {
      for (const socket of held) socket.destroy();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    }
  });

  it('a refused port is a network failure with status 0', async () => {
    const closed: TcpServer = createTcpServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const outcome = await sender.send(`https://receiver.test:${port}/hook`, '{}', JSON_HEADERS);
    expect(outcome).toMatchObject({ ok: false, statusCode: 0, result: 'network' });
  });

  it('a connection reset before any answer is a network failure', async () => {
    receiver.respond('/reset', { reset: true });
    const outcome = await sender.send(receiver.url('/reset'), '{}', JSON_HEADERS);
    expect(outcome).toMatchObject({ ok: false, statusCode: 0, result: 'network' });
  });

  it('a certificate that does not cover the host name is a network failure, and no request is made', async () => {
    const outcome = await sender.send(receiver.url('/tls', 'mismatch.test'), '{}', JSON_HEADERS);
    expect(outcome).toMatchObject({ ok: false, statusCode: 0, result: 'network' });
    expect(receiver.requests).toHaveLength(0);
    // The certificate covers other.test, which reaches the same receiver.
    const covered = await sender.send(receiver.url('/tls', 'other.test'), '{}', JSON_HEADERS);
    expect(covered).toMatchObject({ ok: true, result: '2xx' });
  });

  it('an IP-literal URL is checked against the certificate too (the receiver cert has no IP names)', async () => {
    const outcome = await sender.send(`https://127.0.0.1:${receiver.port}/ip`, '{}', JSON_HEADERS);
    expect(outcome).toMatchObject({ ok: false, statusCode: 0, result: 'network' });
    expect(receiver.requests).toHaveLength(0);
  });

  it('a name DNS does not know is a network failure', async () => {
    const outcome = await sender.send('https://no-such-host.invalid/hook', '{}', JSON_HEADERS);
    expect(outcome).toMatchObject({ ok: false, statusCode: 0, result: 'network' });
  });
});

describe('the outbound address guard at send time', () => {
  it('refuses a host-mapped private address without the allow list, connecting to nothing', async () => {
    // private.test=10.0.0.1: a connection attempt there would hang until the timeout, so a fast
    // 'blocked' also shows that nothing was attempted.
    const outcome = await sender.send(`https://private.test:${receiver.port}/hook`, '{}', JSON_HEADERS);
    expect(outcome).toMatchObject({ ok: false, statusCode: 0, result: 'blocked' });
    expect(outcome.durationMs).toBeLessThan(900);
    expect(receiver.requests).toHaveLength(0);
    expect(receiver.connections).toBe(0);
  });

  describe('without DISPATCH_ALLOW_CIDRS', () => {
    let strict: WebhookSender;
    beforeAll(() => {
      strict = createWebhookSender({ hostMap: HOST_MAP, allowCidrs: '', timeoutMs: 1000 });
    });
    afterAll(() => strict.close());

    it('refuses a host-mapped loopback name, and the receiver sees no connection', async () => {
      const outcome = await strict.send(receiver.url('/hook'), '{}', JSON_HEADERS);
      expect(outcome).toMatchObject({ ok: false, statusCode: 0, result: 'blocked' });
      expect(receiver.connections).toBe(0);
    });

    it('refuses localhost, which always names loopback (RFC 6761, answered without asking DNS)', async () => {
      const outcome = await strict.send(`https://localhost:${receiver.port}/hook`, '{}', JSON_HEADERS);
      expect(outcome).toMatchObject({ ok: false, statusCode: 0, result: 'blocked' });
      expect(receiver.connections).toBe(0);
    });

    it.each([
      ['IPv4 loopback literal', (port: number) => `https://127.0.0.1:${port}/hook`],
      ['IPv4 loopback as an integer', (port: number) => `https://2130706433:${port}/hook`],
      ['IPv6 loopback literal', (port: number) => `https://[::1]:${port}/hook`],
      ['IPv4-mapped loopback literal', (port: number) => `https://[::ffff:127.0.0.1]:${port}/hook`],
      ['link-local literal', (port: number) => `https://169.254.169.254:${port}/hook`],
    ])('refuses an IP-literal host (%s), which never goes through a lookup', async (_what, url) => {
      const outcome = await strict.send(url(receiver.port), '{}', JSON_HEADERS);
      expect(outcome).toMatchObject({ ok: false, statusCode: 0, result: 'blocked' });
      expect(receiver.connections).toBe(0);
    });

    it('refuses anything but https', async () => {
      const outcome = await strict.send(`http://example.com/hook`, '{}', JSON_HEADERS);
      expect(outcome).toMatchObject({ ok: false, statusCode: 0, result: 'blocked' });
    });
  });

  it('an allow list that does not cover the mapped address still refuses it', async () => {
    const narrow = createWebhookSender({ hostMap: HOST_MAP, allowCidrs: '127.0.0.2/32', timeoutMs: 1000 });
    try {
      const outcome = await narrow.send(receiver.url('/hook'), '{}', JSON_HEADERS);
      expect(outcome.result).toBe('blocked');
      expect(receiver.connections).toBe(0);
    } finally {
      await narrow.close();
    }
  });

  it('a malformed setting fails at creation, not at send time', () => {
    expect(() => createWebhookSender({ hostMap: 'receiver.test', allowCidrs: '' })).toThrow(/DISPATCH_HOST_MAP/);
    expect(() => createWebhookSender({ hostMap: '', allowCidrs: '127.0.0.0/40' })).toThrow(/DISPATCH_ALLOW_CIDRS/);
    expect(() => createWebhookSender({ hostMap: '', allowCidrs: '', extraCaFile: '/nonexistent/ca.pem' })).toThrow(
      /NODE_EXTRA_CA_CERTS/,
    );
  });
});

describe('connection reuse', () => {
  it('50 sequential and 50 concurrent sends share a few kept-alive TLS connections', async () => {
    const pooled = createWebhookSender({ hostMap: HOST_MAP, allowCidrs: ALLOW_LOOPBACK, timeoutMs: 2000, connectionsPerOrigin: 4 });
    try {
      for (let i = 0; i < 50; i++) {
        const outcome = await pooled.send(receiver.url('/seq'), `{"i":${i}}`, JSON_HEADERS);
        expect(outcome.ok).toBe(true);
      }
      expect(receiver.tlsSessions).toBe(1);
      const outcomes = await Promise.all(
        Array.from({ length: 50 }, (_, i) => pooled.send(receiver.url('/par'), `{"i":${i}}`, JSON_HEADERS)),
      );
      expect(outcomes.every((o) => o.ok)).toBe(true);
      expect(receiver.requests).toHaveLength(100);
      // One handshake per connection, at most the per-origin cap, instead of one per send.
      expect(receiver.tlsSessions).toBeLessThanOrEqual(4);
      expect(new Set(receiver.requests.map((r) => r.connection)).size).toBe(receiver.tlsSessions);
    } finally {
      await pooled.close();
    }
  });

  it('without a cap, connections are bounded by the concurrency and reused afterwards', async () => {
    const open = createWebhookSender({ hostMap: HOST_MAP, allowCidrs: ALLOW_LOOPBACK, timeoutMs: 2000 });
    try {
      for (let round = 0; round < 5; round++) {
        const outcomes = await Promise.all(
          Array.from({ length: 10 }, (_, i) => open.send(receiver.url('/round'), `{"round":${round},"i":${i}}`, JSON_HEADERS)),
        );
        expect(outcomes.every((o) => o.ok)).toBe(true);
      }
      expect(receiver.requests).toHaveLength(50);
      expect(receiver.tlsSessions).toBeLessThanOrEqual(10);
    } finally {
      await open.close();
    }
  });
});

describe('lifecycle', () => {
  it('after close, a send fails as a network failure and close can be called again', async () => {
    const closing = createWebhookSender({ hostMap: HOST_MAP, allowCidrs: ALLOW_LOOPBACK, timeoutMs: 1000 });
    expect((await closing.send(receiver.url('/before-close'), '{}', JSON_HEADERS)).ok).toBe(true);
    await closing.close();
    await closing.close();
    const outcome = await closing.send(receiver.url('/after-close'), '{}', JSON_HEADERS);
    expect(outcome).toMatchObject({ ok: false, statusCode: 0, result: 'network' });
    expect(receiver.requestsTo('/after-close')).toHaveLength(0);
  });
});
