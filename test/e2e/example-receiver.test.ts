import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { attemptDelivery, createWebhookSender, type WebhookSender } from '@svc/webhook-sender';
import { sign, standardSignatureHeader } from '@svc/webhook-signature';
import { eventually } from '../support/eventually';
import { freePort } from '../support/free-port';
import { serviceProcess, type ServiceProcess } from '../support/service-process';
import { createOne, moveOn } from '../support/shipment-fixtures';
import { bearer, createCompany, type Company } from '../support/test-gateway';
import { startDispatcherFixture, type DispatcherFixture } from '../support/test-dispatcher';
import { createWebhook } from '../support/webhook-fixtures';

/**
 * examples/receiver run by its documented command (README.md, "Quick start"), as a child process with
 * the test certificate, receiving real deliveries from the dispatcher (a shipment's events, a PING, a
 * secret rotation seen from the old and from the new secret, saying which signature matched), and
 * refusing a wrong secret, a tampered body and a stale (replayed) delivery.
 */

const ROOT = join(__dirname, '../..');
const COMMAND = 'node --import tsx examples/receiver/receiver.ts';
const ENTRY = 'examples/receiver/receiver.ts';

let fx: DispatcherFixture;
let company: Company;
let port: number;
let webhook: { id: string; secret: string };
let receiver: ServiceProcess | undefined;
let sender: WebhookSender;

const url = (): string => `https://receiver.test:${port}/webhooks/svc`;
const api = (method: 'get' | 'post', path: string, body?: object) => {
  const r = fx.gw.http[method](`/api/v1${path}`).set('Authorization', bearer(company.live));
  return body === undefined ? r : r.send(body);
};

/** Starts the receiver as the README says, with these settings (stopping the previous one). */
async function startReceiver(env: Record<string, string>): Promise<ServiceProcess> {
  await receiver?.stop();
  // serviceProcess runs `node --import tsx <entry>` from the root: exactly COMMAND.
  receiver = serviceProcess({ name: 'example-receiver', entry: ENTRY, env: { RECEIVER_PORT: String(port), ...env }, readyLine: 'receiver listening', stopTimeoutMs: 5000 });
  await receiver.start();
  return receiver;
}

const lines = (): string[] => (receiver?.recentLines() ?? []).filter((l) => / (VALID|INVALID) /.test(l));

/** Waits for a log line matching every pattern and returns it. */
async function lineWith(...patterns: RegExp[]): Promise<string> {
  let found: string | undefined;
  await eventually(
    async () => {
      found = lines().find((l) => patterns.every((p) => p.test(l)));
      return found !== undefined;
    },
    15_000,
    `a receiver line matching ${patterns.join(' ')} (lines: ${JSON.stringify(lines())})`,
  );
  return found!;
}

beforeAll(async () => {
  port = await freePort();
  // The loopback settings of the README's quick start: the gateway sends PINGs, the dispatcher everything else.
  const loopback = { DISPATCH_HOST_MAP: 'receiver.test=127.0.0.1', DISPATCH_ALLOW_CIDRS: '127.0.0.0/8' };
  fx = await startDispatcherFixture('example-receiver', { gateway: { env: loopback }, dispatcher: { env: loopback } });
  company = await createCompany(fx.gw, { planActivo: true, creditos: 100 });
  webhook = await createWebhook(fx.gw, company.live, url());
  sender = createWebhookSender({ hostMap: 'receiver.test=127.0.0.1', allowCidrs: '127.0.0.0/8', timeoutMs: 5000 });
}, 60_000);

afterAll(async () => {
  await receiver?.stop();
  await sender?.close();
  await fx?.stop();
});

it('the README documents the command this test runs', () => {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const section = readme.split('\n## Quick start')[1]?.split('\n## ')[0] ?? '';
  expect(section).toContain(COMMAND);
  expect(readFileSync(join(ROOT, 'examples/receiver/README.md'), 'utf8')).toContain(COMMAND);
});

it('type-checks strictly (its own tsconfig: the root one covers services, packages and test only)', () => {
  const tsc = join(ROOT, 'node_modules/typescript/bin/tsc');
  expect(() => execFileSync(process.execPath, [tsc, '-p', join(ROOT, 'examples/receiver/tsconfig.json')], { stdio: 'pipe' })).not.toThrow();
}, 60_000);

it('refuses to start without a secret, saying what to set', async () => {
  const p = serviceProcess({ name: 'receiver-no-secret', entry: ENTRY, env: { RECEIVER_PORT: String(port), WEBHOOK_SECRET: '' }, readyLine: 'receiver listening' });
  await expect(p.start()).rejects.toThrow(/set WEBHOOK_SECRET/);
  await p.stop();
});

describe('deliveries from the dispatcher', () => {
  let numeroGuia: string;

  beforeAll(async () => {
    await startReceiver({ WEBHOOK_SECRET: webhook.secret });
  }, 60_000);

  it('verifies and logs a shipment event: event, eventId, deliveryId, modo, secuencia, valid; the dispatcher records a 200', async () => {
    const created = await createOne(fx.gw, company.live);
    expect(created.status).toBe(201);
    numeroGuia = (created.body as { data: { numeroGuia: string } }).data.numeroGuia;
    const line = await lineWith(/ VALID GUIA_CREADA /);
    expect(line).toMatch(/ VALID GUIA_CREADA eventId=[0-9a-f-]{36} deliveryId=[0-9a-f-]{36} modo=live secuencia=1 scheme=svc signature=current secret=WEBHOOK_SECRET$/);
    const delivery = line.match(/deliveryId=(\S+)/)![1]!;
    await eventually(
      async () => {
        const res = await api('get', `/webhooks/${webhook.id}/entregas/${delivery}`);
        return res.status === 200 && (res.body as { data: { exitoso: boolean; statusCode: number } }).data.exitoso;
      },
      15_000,
      'the delivery recorded as successful',
    );
  });

  it('verifies a PING', async () => {
    const res = await api('post', `/webhooks/${webhook.id}/test`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ data: { exitoso: true, statusCode: 200 } });
    expect(await lineWith(/ VALID PING /)).toMatch(/ VALID PING eventId=\S+ deliveryId=\S+ modo=live secuencia=- scheme=svc signature=current secret=WEBHOOK_SECRET$/);
  });

  it('after a rotation, still verifies with the old secret only (X-SVC-Signature-Anterior: signature=previous), then with the new one and the old as WEBHOOK_SECRET_PREVIOUS (signature=current)', async () => {
    const rotated = await api('post', `/webhooks/${webhook.id}/secreto`, { solaparHoras: 1 });
    expect(rotated.status).toBe(200);
    const newSecret = (rotated.body as { data: { secret: string } }).data.secret;
    expect(newSecret).not.toBe(webhook.secret);
    // The dispatcher reads a webhook's secrets at most 1 s late (WEBHOOK_CACHE_MS of its delivery worker).
    await new Promise((r) => setTimeout(r, 1500));

    expect((await moveOn(fx.gw, numeroGuia, { evento: 'GUIA_RECOLECTADA' })).status).toBe(200);
    expect(await lineWith(/ VALID GUIA_RECOLECTADA /)).toMatch(/ modo=live secuencia=2 scheme=svc signature=previous secret=WEBHOOK_SECRET$/);

    await startReceiver({ WEBHOOK_SECRET: newSecret, WEBHOOK_SECRET_PREVIOUS: webhook.secret });
    expect((await moveOn(fx.gw, numeroGuia, { evento: 'GUIA_EN_BODEGA' })).status).toBe(200);
    expect(await lineWith(/ VALID GUIA_EN_BODEGA /)).toMatch(/ secuencia=3 scheme=svc signature=current secret=WEBHOOK_SECRET$/);

    // The new secret alone verifies too (the overlap is for receivers still on the old one).
    await startReceiver({ WEBHOOK_SECRET: newSecret });
    expect((await moveOn(fx.gw, numeroGuia, { evento: 'GUIA_EN_RUTA' })).status).toBe(200);
    expect(await lineWith(/ VALID GUIA_EN_RUTA /)).toMatch(/ secuencia=4 scheme=svc signature=current secret=WEBHOOK_SECRET$/);
    webhook = { ...webhook, secret: newSecret };
  }, 60_000);
});

describe('refusals: 4xx and an INVALID line with the reason', () => {
  beforeAll(async () => {
    await startReceiver({ WEBHOOK_SECRET: webhook.secret });
  }, 60_000);

  /** A delivery as the dispatcher builds it, signed with `secret`, stamped `at`. */
  function signed(secret: string, at = new Date(), eventId = randomUUID()): { body: string; headers: Record<string, string> } {
    const seconds = Math.floor(at.getTime() / 1000);
    const body = JSON.stringify({ event: 'GUIA_ENTREGADA', timestamp: at.toISOString(), webhookId: randomUUID(), data: { numeroGuia: 'GT-1', estado: 'ENTREGADO' } });
    const headers = {
      'content-type': 'application/json',
      'x-svc-signature': sign(body, secret),
      'x-svc-event': 'GUIA_ENTREGADA',
      'x-svc-timestamp': at.toISOString(),
      'webhook-id': eventId,
      'webhook-timestamp': String(seconds),
      'webhook-signature': standardSignatureHeader(eventId, seconds, body, [secret]),
      'x-svc-modo': 'live',
      'x-svc-secuencia': '5',
    };
    return { body, headers };
  }

  it('a delivery signed with another secret (through attemptDelivery, the dispatcher\'s code path)', async () => {
    const eventId = randomUUID();
    const outcome = await attemptDelivery(sender, {
      url: url(),
      secret: `whsec_${Buffer.alloc(32, 7).toString('base64')}`,
      previousSecret: null,
      deliveryId: randomUUID(),
      eventId,
      event: 'GUIA_CREADA',
      data: { numeroGuia: 'GT-9', estado: 'CREADA' },
      sequence: 1,
      mode: 'live',
    });
    expect(outcome).toMatchObject({ ok: false, statusCode: 401, result: '4xx' });
    expect(await lineWith(new RegExp(`eventId=${eventId} `))).toMatch(/ INVALID GUIA_CREADA eventId=\S+ modo=live secuencia=1 reason=invalid_signature$/);
  });

  it('a tampered body', async () => {
    const eventId = randomUUID();
    const { body, headers } = signed(webhook.secret, new Date(), eventId);
    const outcome = await sender.send(url(), body.replace('GT-1', 'GT-2'), headers);
    expect(outcome.statusCode).toBe(401);
    expect(await lineWith(new RegExp(`eventId=${eventId} `))).toMatch(/ INVALID GUIA_ENTREGADA .* reason=invalid_signature$/);
  });

  it('a stale delivery (a replay 10 minutes later), correctly signed', async () => {
    const eventId = randomUUID();
    const { body, headers } = signed(webhook.secret, new Date(Date.now() - 10 * 60_000), eventId);
    const outcome = await sender.send(url(), body, headers);
    expect(outcome.statusCode).toBe(401);
    expect(await lineWith(new RegExp(`eventId=${eventId} `))).toMatch(/ INVALID GUIA_ENTREGADA .* reason=timestamp_out_of_tolerance$/);
  });

  it('an unsigned request', async () => {
    const eventId = randomUUID();
    const { body, headers } = signed(webhook.secret, new Date(), eventId);
    const unsigned = Object.fromEntries(Object.entries(headers).filter(([name]) => !name.includes('signature')));
    expect((await sender.send(url(), body, unsigned)).statusCode).toBe(401);
    expect(await lineWith(new RegExp(`eventId=${eventId} `))).toMatch(/ reason=missing_signature$/);
  });

  it('says which webhook-signature entry matched: the first (current secret) or the one after it (previous secret)', async () => {
    const other = `whsec_${Buffer.alloc(32, 9).toString('base64')}`;
    for (const [order, expected] of [
      [[webhook.secret, other], 'current'],
      [[other, webhook.secret], 'previous'],
    ] as const) {
      const eventId = randomUUID();
      const { body, headers } = signed(webhook.secret, new Date(), eventId);
      // Standard Webhooks only, as during a rotation: the current secret's entry first, the previous one's after a space.
      const standardOnly = Object.fromEntries(Object.entries(headers).filter(([name]) => name !== 'x-svc-signature'));
      standardOnly['webhook-signature'] = standardSignatureHeader(eventId, Number(headers['webhook-timestamp']), body, [...order]);
      expect((await sender.send(url(), body, standardOnly)).statusCode).toBe(200);
      expect(await lineWith(new RegExp(`eventId=${eventId} `))).toMatch(new RegExp(` VALID GUIA_ENTREGADA .* scheme=standard signature=${expected} secret=WEBHOOK_SECRET$`));
    }
  });

  it('the same delivery, fresh and untouched, is valid (control)', async () => {
    const eventId = randomUUID();
    const { body, headers } = signed(webhook.secret, new Date(), eventId);
    expect((await sender.send(url(), body, headers)).statusCode).toBe(200);
    expect(await lineWith(new RegExp(`eventId=${eventId} `))).toMatch(/ VALID GUIA_ENTREGADA .* modo=live secuencia=5 scheme=svc/);
  });
});
