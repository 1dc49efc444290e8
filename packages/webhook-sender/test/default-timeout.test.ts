import { createWebhookSender, DEFAULT_TIMEOUT_MS } from '@svc/webhook-sender';
import { startReceiver } from '../../../test/support/https-receiver';

/** The contract's 5-second limit, with the sender's default (every other test uses a short one). */
it('with the default timeout, a receiver that never answers fails the attempt after 5 s', async () => {
  expect(DEFAULT_TIMEOUT_MS).toBe(5000);
  const receiver = await startReceiver();
  receiver.respond('/never', { hang: true });
  const sender = createWebhookSender({ hostMap: 'receiver.test=127.0.0.1', allowCidrs: '127.0.0.0/8' });
  try {
    const started = Date.now();
    const outcome = await sender.send(receiver.url('/never'), '{"event":"PING"}', { 'content-type': 'application/json' });
    const elapsed = Date.now() - started;
    expect(outcome).toMatchObject({ ok: false, statusCode: 0, result: 'timeout' });
    expect(elapsed).toBeGreaterThanOrEqual(5000);
    expect(elapsed).toBeLessThan(6500);
    expect(outcome.durationMs).toBeGreaterThanOrEqual(5000);
    // The request did arrive: the timeout covers a receiver that took it and never answered.
    expect(receiver.requestsTo('/never')).toHaveLength(1);
  } finally {
    await sender.close();
    await receiver.close();
  }
}, 15000);
