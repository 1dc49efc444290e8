import { lookup } from 'node:dns/promises';
import { readFile } from 'node:fs/promises';
import { performance } from 'node:perf_hooks';
import { createNameResolver, createWebhookSender, NameResolutionError, type WebhookSender } from '@svc/webhook-sender';
import { startReceiver, type Receiver } from '../../../test/support/https-receiver';
import { startFakeDns, type FakeDns } from './support/fake-dns.server';
import { sleep } from '../../../test/support/eventually';

/**
 * Name resolution through c-ares against real name servers on UDP 127.0.0.1: one that answers (and
 * counts the questions) and one that never answers.
 */

const JSON_HEADERS = { 'content-type': 'application/json' };

let receiver: Receiver;
let silent: FakeDns;

beforeAll(async () => {
  receiver = await startReceiver();
  silent = await startFakeDns({}, { silent: true });
});

afterAll(async () => {
  await receiver.close();
  await silent.close();
});

beforeEach(() => receiver.reset());

/** Settles with how long `promise` took, rejection included. */
async function timed<T>(promise: Promise<T>): Promise<{ value?: T; error?: unknown; ms: number }> {
  const started = performance.now();
  try {
    return { value: await promise, ms: performance.now() - started };
  } catch (error) {
    return { error, ms: performance.now() - started };
  }
}

describe('a name server that never answers', () => {
  let sender: WebhookSender;
  beforeAll(() => {
    // The default attempt (5 s), so the resolver's own 2 s are what ends the lookup.
    sender = createWebhookSender({ hostMap: 'receiver.test=127.0.0.1', allowCidrs: '127.0.0.0/8', dnsServers: [silent.server] });
  });
  afterAll(() => sender.close());

  it('fails the attempt as DNS once the resolver gives up (2 s), long before the deadline', async () => {
    const started = performance.now();
    const outcome = await sender.send(`https://quiet.test:${receiver.port}/hook`, '{}', JSON_HEADERS);
    const wallMs = performance.now() - started;
    expect(outcome).toMatchObject({ ok: false, statusCode: 0, result: 'network', error: 'DNS', response: null });
    expect(outcome.message).toBe('cannot resolve quiet.test: no answer from the name server within 2 s (ETIMEOUT)');
    expect(outcome.durationMs).toBeGreaterThanOrEqual(1990);
    expect(wallMs).toBeLessThan(2200);
    // Both families were asked, of the fake server and not of the system's.
    expect(silent.count('quiet.test', 'A')).toBeGreaterThanOrEqual(1);
    expect(silent.count('quiet.test', 'AAAA')).toBeGreaterThanOrEqual(1);
    console.log(`silent name server: DNS after ${outcome.durationMs} ms (wall ${wallMs.toFixed(1)} ms)`);
  });

  it('while 8 such lookups hang, other deliveries and threadpool work go on at once', async () => {
    const hanging = Array.from({ length: 8 }, (_, i) => sender.send(`https://hang-${i}.test:${receiver.port}/hook`, '{}', JSON_HEADERS));
    // Every lookup is out (both families of each): they are all hanging from here on.
    for (let waited = 0; silent.queries.filter((q) => q.name.startsWith('hang-')).length < 16; waited += 10) {
      if (waited > 1000) throw new Error('the lookups did not reach the name server');
      await sleep(10);
    }
    const [delivered, files, system] = await Promise.all([
      timed(sender.send(receiver.url('/meanwhile'), '{}', JSON_HEADERS)),
      // More threadpool tasks than it has threads (4), and getaddrinfo among them.
      timed(Promise.all(Array.from({ length: 8 }, () => readFile(__filename)))),
      timed(Promise.all(Array.from({ length: 4 }, () => lookup('localhost')))),
    ]);
    expect(delivered.value).toMatchObject({ ok: true, result: '2xx' });
    expect(delivered.ms).toBeLessThan(500);
    expect(files.error).toBeUndefined();
    expect(files.ms).toBeLessThan(200);
    expect(system.error).toBeUndefined();
    expect(system.ms).toBeLessThan(200);
    console.log(`while 8 lookups hang: delivery ${delivered.ms.toFixed(1)} ms, 8 readFile ${files.ms.toFixed(1)} ms, 4 dns.lookup ${system.ms.toFixed(1)} ms`);

    const outcomes = await Promise.all(hanging);
    expect(outcomes.map((o) => o.error)).toEqual(Array(8).fill('DNS'));
    for (const o of outcomes) expect(o.durationMs).toBeLessThan(2200);
  });

  it('never outlives the attempt: a deadline shorter than the resolver timeout is the TIMEOUT', async () => {
    const short = createWebhookSender({ hostMap: '', allowCidrs: '127.0.0.0/8', dnsServers: [silent.server], timeoutMs: 800, dnsTimeoutMs: 3000 });
    try {
      const started = performance.now();
      const outcome = await short.send(`https://short.test:${receiver.port}/hook`, '{}', JSON_HEADERS);
      expect(outcome).toMatchObject({ ok: false, statusCode: 0, result: 'timeout', error: 'TIMEOUT', message: 'no answer within 0.8 s' });
      expect(outcome.durationMs).toBeLessThanOrEqual(900);
      expect(performance.now() - started).toBeLessThanOrEqual(900);
    } finally {
      await short.close();
    }
  });

  it('with a short attempt and no dnsTimeoutMs, the resolver takes half of it, so the cause stays DNS', async () => {
    const short = createWebhookSender({ hostMap: '', allowCidrs: '127.0.0.0/8', dnsServers: [silent.server], timeoutMs: 1000 });
    try {
      const outcome = await short.send(`https://half.test:${receiver.port}/hook`, '{}', JSON_HEADERS);
      expect(outcome).toMatchObject({ error: 'DNS', message: 'cannot resolve half.test: no answer from the name server within 0.5 s (ETIMEOUT)' });
      expect(outcome.durationMs).toBeGreaterThanOrEqual(495);
      expect(outcome.durationMs).toBeLessThan(700);
    } finally {
      await short.close();
    }
  });
});

describe('answers, through the sender', () => {
  let dns: FakeDns;
  let sender: WebhookSender;

  beforeEach(async () => {
    dns = await startFakeDns({
      // Only an A record: the AAAA question gets an empty answer, which is fine.
      'receiver.test': { a: ['127.0.0.1'], ttl: 1 },
      'other.test': { a: ['127.0.0.1'], ttl: 60, delayMs: 200 },
      'private.test': { a: ['10.0.0.7'] },
      'mixed.test': { a: ['127.0.0.1'], aaaa: ['::1'] },
      'broken.test': { rcode: 2 },
    });
    // receiver.test is not host-mapped: it is the fake name server that sends it to the receiver.
    sender = createWebhookSender({ hostMap: '', allowCidrs: '127.0.0.0/8', dnsServers: [dns.server], timeoutMs: 2000 });
    // A new connection (so a new lookup) per send: kept-alive connections skip the lookup.
    receiver.respond('/hook', { status: 200, headers: { connection: 'close' } });
  });

  afterEach(async () => {
    await sender.close();
    await dns.close();
  });

  it('caches an answer within its TTL: two sends make one query, a send after it expires another', async () => {
    expect(await sender.send(receiver.url('/hook'), '{}', JSON_HEADERS)).toMatchObject({ ok: true });
    expect(await sender.send(receiver.url('/hook'), '{}', JSON_HEADERS)).toMatchObject({ ok: true });
    expect(receiver.connections).toBe(2);
    expect(dns.count('receiver.test', 'A')).toBe(1);
    expect(dns.count('receiver.test', 'AAAA')).toBe(1);

    await sleep(1100);
    expect(await sender.send(receiver.url('/hook'), '{}', JSON_HEADERS)).toMatchObject({ ok: true });
    expect(receiver.connections).toBe(3);
    expect(dns.count('receiver.test', 'A')).toBe(2);
  });

  it('concurrent lookups of one name share a single query', async () => {
    const outcomes = await Promise.all(Array.from({ length: 5 }, () => sender.send(receiver.url('/hook', 'other.test'), '{}', JSON_HEADERS)));
    expect(outcomes.every((o) => o.ok)).toBe(true);
    expect(receiver.connections).toBe(5);
    expect(dns.count('other.test', 'A')).toBe(1);
  });

  it('refuses a name the name server puts in a private range, connecting to nothing', async () => {
    const outcome = await sender.send(`https://private.test:${receiver.port}/hook`, '{}', JSON_HEADERS);
    expect(outcome).toMatchObject({ ok: false, result: 'blocked', error: 'BLOCKED_ADDRESS' });
    // The tenant reads this in the delivery log: neither the address nor its range (docs/integrators.md, The delivery log).
    expect(outcome.message).toBe('private.test resolves to a non-public address');
  });

  it('refuses a name as a whole when any of its addresses is guarded (::1 beside an allowed 127.0.0.1)', async () => {
    const outcome = await sender.send(receiver.url('/hook', 'mixed.test'), '{}', JSON_HEADERS);
    expect(outcome).toMatchObject({ ok: false, result: 'blocked', error: 'BLOCKED_ADDRESS' });
    expect(outcome.message).toBe('mixed.test resolves to a non-public address');
    expect(receiver.connections).toBe(0);
  });

  it('DISPATCH_HOST_MAP comes first: a mapped name is never asked of DNS', async () => {
    dns.set('receiver.test', { a: ['10.0.0.9'] });
    const mapped = createWebhookSender({ hostMap: 'receiver.test=127.0.0.1', allowCidrs: '127.0.0.0/8', dnsServers: [dns.server] });
    try {
      expect(await mapped.send(receiver.url('/hook'), '{}', JSON_HEADERS)).toMatchObject({ ok: true });
      expect(dns.queries).toHaveLength(0);
    } finally {
      await mapped.close();
    }
  });

  it('a name the server does not know, or fails on, is DNS with its reason', async () => {
    const unknown = await sender.send(`https://nowhere.test:${receiver.port}/hook`, '{}', JSON_HEADERS);
    expect(unknown).toMatchObject({ ok: false, result: 'network', error: 'DNS', message: 'cannot resolve nowhere.test: no such name (ENOTFOUND)' });
    const broken = await sender.send(`https://broken.test:${receiver.port}/hook`, '{}', JSON_HEADERS);
    expect(broken).toMatchObject({ error: 'DNS', message: 'cannot resolve broken.test: the name server failed (ESERVFAIL)' });
  });

  it('answers the RFC 6761 names itself: localhost is loopback, *.invalid does not exist', async () => {
    const strict = createWebhookSender({ hostMap: '', allowCidrs: '', dnsServers: [dns.server] });
    try {
      for (const host of ['localhost', 'api.localhost']) {
        const outcome = await strict.send(`https://${host}:${receiver.port}/hook`, '{}', JSON_HEADERS);
        expect(outcome).toMatchObject({ result: 'blocked', error: 'BLOCKED_ADDRESS' });
      }
      const invalid = await strict.send('https://no-such-host.invalid/hook', '{}', JSON_HEADERS);
      expect(invalid).toMatchObject({ error: 'DNS' });
      expect(invalid.message).toMatch(/^cannot resolve no-such-host\.invalid: no such name/);
      expect(invalid.durationMs).toBeLessThan(50);
      expect(dns.queries).toHaveLength(0);
      expect(receiver.connections).toBe(0);
    } finally {
      await strict.close();
    }
  });
});

describe('createNameResolver', () => {
  let dns: FakeDns;
  beforeEach(async () => {
    dns = await startFakeDns({
      'zero.test': { a: ['192.0.2.1'], ttl: 0 },
      'both.test': { a: ['192.0.2.2', '192.0.2.3'], aaaa: ['2001:db8::1'], ttl: 30 },
      'six.test': { aaaa: ['2001:db8::2'] },
      'a.test': { a: ['192.0.2.10'] },
      'b.test': { a: ['192.0.2.11'] },
      'c.test': { a: ['192.0.2.12'] },
      'no-aaaa.test': { a: ['192.0.2.13'], drop: ['AAAA'] },
    });
  });
  afterEach(() => dns.close());

  it('gives IPv4 first, then IPv6, and a name with one family only', async () => {
    const resolver = createNameResolver({ servers: [dns.server] });
    try {
      expect(await resolver.resolve('both.test')).toEqual([
        { address: '192.0.2.2', family: 4 },
        { address: '192.0.2.3', family: 4 },
        { address: '2001:db8::1', family: 6 },
      ]);
      expect(await resolver.resolve('SIX.test.')).toEqual([{ address: '2001:db8::2', family: 6 }]);
    } finally {
      resolver.close();
    }
  });

  it('a family whose question is never answered does not sink the other: the A answer stands at the timeout', async () => {
    const resolver = createNameResolver({ servers: [dns.server], timeoutMs: 300 });
    try {
      const { value, ms } = await timed(resolver.resolve('no-aaaa.test'));
      expect(value).toEqual([{ address: '192.0.2.13', family: 4 }]);
      // It waited for the unanswered AAAA question until about the timeout. c-ares's own timeout
      // (the backstop, the same 300 ms on its own clock) may end it a little first: 291 ms was seen
      // in a CI run on a loaded machine.
      expect(ms).toBeGreaterThanOrEqual(250);
      expect(ms).toBeLessThan(400);
    } finally {
      resolver.close();
    }
  });

  it('keeps a TTL of 0 for a second, not for no time at all', async () => {
    const resolver = createNameResolver({ servers: [dns.server] });
    try {
      await resolver.resolve('zero.test');
      await resolver.resolve('zero.test');
      expect(dns.count('zero.test', 'A')).toBe(1);
      await sleep(1050);
      await resolver.resolve('zero.test');
      expect(dns.count('zero.test', 'A')).toBe(2);
    } finally {
      resolver.close();
    }
  });

  it('bounds the cache, dropping the least recently used name', async () => {
    const resolver = createNameResolver({ servers: [dns.server], maxEntries: 2 });
    try {
      await resolver.resolve('a.test');
      await resolver.resolve('b.test');
      await resolver.resolve('a.test'); // a is now the most recently used
      await resolver.resolve('c.test'); // evicts b
      await resolver.resolve('a.test');
      await resolver.resolve('b.test');
      expect(dns.count('a.test', 'A')).toBe(1);
      expect(dns.count('b.test', 'A')).toBe(2);
    } finally {
      resolver.close();
    }
  });

  it('waits no longer than the budget it is given', async () => {
    const resolver = createNameResolver({ servers: [silent.server], timeoutMs: 2000 });
    try {
      const { error, ms } = await timed(resolver.resolve('budget.test', 300));
      expect(error).toBeInstanceOf(NameResolutionError);
      expect(error).toMatchObject({ dnsCode: 'ETIMEOUT', hostname: 'budget.test' });
      // It waited for the unanswered AAAA question until about the timeout. c-ares's own timeout
      // (the backstop, the same 300 ms on its own clock) may end it a little first: 291 ms was seen
      // in a CI run on a loaded machine.
      expect(ms).toBeGreaterThanOrEqual(250);
      expect(ms).toBeLessThan(400);
    } finally {
      resolver.close();
    }
  });

  it('close() cancels the queries in flight at once', async () => {
    const resolver = createNameResolver({ servers: [silent.server], timeoutMs: 2000 });
    const pending = timed(resolver.resolve('cancelled.test'));
    await sleep(50);
    resolver.close();
    const { error, ms } = await pending;
    expect(error).toMatchObject({ dnsCode: 'ECANCELLED' });
    expect(ms).toBeLessThan(200);
    await expect(resolver.resolve('after.test')).rejects.toMatchObject({ dnsCode: 'ECANCELLED' });
  });

  it('rejects a malformed server list at creation', () => {
    expect(() => createNameResolver({ servers: ['not-an-address'] })).toThrow();
    expect(() => createWebhookSender({ hostMap: '', allowCidrs: '', dnsServers: ['999.1.1.1:53'] })).toThrow();
  });
});
