import { performance } from 'node:perf_hooks';
import { createWebhookSender, DEFAULT_TIMEOUT_MS, type SendOutcome, type WebhookSender } from '@svc/webhook-sender';
import { startTlsStaller, startTrickler, type StallingServer } from './support/stalling.server';

/**
 * The attempt's deadline is hard: whatever stage the attempt is in (TLS, headers, a body that keeps
 * coming), its outcome is decided when timeoutMs has passed, within a few milliseconds.
 */

const HOST_MAP = 'receiver.test=127.0.0.1';
const JSON_HEADERS = { 'content-type': 'application/json' };
/** The contract: no recorded attempt longer than the deadline plus 100 ms. */
const SLACK_MS = 100;

let staller: StallingServer;
let trickler: StallingServer;

beforeAll(async () => {
  staller = await startTlsStaller();
  trickler = await startTrickler(100);
});

afterAll(async () => {
  await staller.close();
  await trickler.close();
});

async function timed(sender: WebhookSender, url: string): Promise<{ outcome: SendOutcome; wallMs: number }> {
  const started = performance.now();
  const outcome = await sender.send(url, '{}', JSON_HEADERS);
  return { outcome, wallMs: performance.now() - started };
}

function expectTimedOut({ outcome, wallMs }: { outcome: SendOutcome; wallMs: number }, timeoutMs: number): void {
  expect(outcome).toMatchObject({ ok: false, statusCode: 0, result: 'timeout', error: 'TIMEOUT', message: `no answer within ${timeoutMs / 1000} s`, response: null });
  expect(outcome.durationMs).toBeGreaterThanOrEqual(timeoutMs - 1);
  expect(outcome.durationMs).toBeLessThanOrEqual(timeoutMs + SLACK_MS);
  expect(wallMs).toBeLessThanOrEqual(timeoutMs + SLACK_MS);
}

describe('with a short timeout', () => {
  const TIMEOUT_MS = 1000;
  let sender: WebhookSender;
  beforeAll(() => {
    sender = createWebhookSender({ hostMap: HOST_MAP, allowCidrs: '127.0.0.0/8', timeoutMs: TIMEOUT_MS });
  });
  afterAll(() => sender.close());

  it('a server that accepts TCP and stalls the TLS handshake times out at the deadline', async () => {
    const before = staller.connections;
    const result = await timed(sender, `https://receiver.test:${staller.port}/hook`);
    expectTimedOut(result, TIMEOUT_MS);
    expect(staller.connections).toBe(before + 1);
  });

  it('a 200 whose body trickles in one byte at a time, never ending, times out at the deadline', async () => {
    const before = trickler.bytesWritten;
    const result = await timed(sender, `https://receiver.test:${trickler.port}/hook`);
    expectTimedOut(result, TIMEOUT_MS);
    // The headers and a steady body did come: each byte just did not buy more time.
    expect(trickler.bytesWritten - before).toBeGreaterThanOrEqual(5);
  });
});

it('with the default 5 s, a stalled handshake and a trickling body are both recorded at no more than 5.1 s', async () => {
  expect(DEFAULT_TIMEOUT_MS).toBe(5000);
  const sender = createWebhookSender({ hostMap: HOST_MAP, allowCidrs: '127.0.0.0/8' });
  try {
    const started = performance.now();
    const [stalled, trickled] = await Promise.all([
      timed(sender, `https://receiver.test:${staller.port}/hook`),
      timed(sender, `https://receiver.test:${trickler.port}/hook`),
    ]);
    const wallMs = performance.now() - started;
    expectTimedOut(stalled, DEFAULT_TIMEOUT_MS);
    expectTimedOut(trickled, DEFAULT_TIMEOUT_MS);
    expect(wallMs).toBeLessThanOrEqual(DEFAULT_TIMEOUT_MS + SLACK_MS);
    // Printed for the record: how close to the deadline the outcomes were decided.
    console.log(`default deadline: stalled TLS ${stalled.outcome.durationMs} ms (wall ${wallMs.toFixed(1)} ms), trickling body ${trickled.outcome.durationMs} ms`);
  } finally {
    await sender.close();
  }
}, 15000);

it('after a deadline, the abandoned work is cut on close() instead of awaited', async () => {
  const sender = createWebhookSender({ hostMap: HOST_MAP, allowCidrs: '127.0.0.0/8', timeoutMs: 500 });
  const results = await Promise.all([
    timed(sender, `https://receiver.test:${staller.port}/hook`),
    timed(sender, `https://receiver.test:${trickler.port}/hook`),
  ]);
  for (const result of results) expectTimedOut(result, 500);
  // The stalled handshake is still waiting for undici's connect timeout here.
  const started = performance.now();
  await sender.close();
  expect(performance.now() - started).toBeLessThan(200);
});
