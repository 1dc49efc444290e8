import { verify } from '@svc/webhook-signature';
import type { Receiver } from '../../../test/support/https-receiver';
import { bearer, createCompany, startGatewayFixture, type Company, type GatewayFixture, type TestGateway } from '../../../test/support/test-gateway';
import { sleep } from '../../../test/support/eventually';

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const envelope = (code: string) => ({ success: false, error: { code, message: expect.any(String) } });

describe('POST /api/v1/webhooks/:id/test (PING) against a real HTTPS receiver', () => {
  let fx: GatewayFixture;
  let gw: TestGateway;
  let receiver: Receiver;
  let c: Company;

  beforeAll(async () => {
    fx = await startGatewayFixture('ping', {
      receiver: true,
      env: {
        RATE_LIMIT_PER_MINUTE: '100000',
        DISPATCH_HOST_MAP: 'receiver.test=127.0.0.1,private.test=10.1.2.3',
        DISPATCH_ALLOW_CIDRS: '127.0.0.0/8',
      },
    });
    gw = fx.gw;
    receiver = fx.receiver!;
    c = await createCompany(gw);
  });
  afterAll(() => fx?.stop());

  const api = (method: 'get' | 'post' | 'delete', path: string, token = c.live, body?: object) => {
    const r = gw.http[method](`/api/v1${path}`).set('Authorization', bearer(token));
    return body === undefined ? r : r.send(body);
  };
  const hook = async (path: string): Promise<{ id: string; secret: string }> => {
    const res = await api('post', '/webhooks', c.live, { url: receiver.url(path) });
    if (res.status !== 201) throw new Error(`${res.status} ${JSON.stringify(res.body)}`);
    // Each test uses its own path; freeing the slot keeps the company under the limit of 10.
    return res.body.data as { id: string; secret: string };
  };
  const retire = (id: string) => api('delete', `/webhooks/${id}`);

  it('sends one signed PING and answers { exitoso, statusCode, durationMs }; the attempt is recorded', async () => {
    // A receiver that takes a moment: the delivery is created when the attempt starts, not when it is recorded.
    receiver.respond('/ping-ok', { status: 200, delayMs: 100 });
    const w = await hook('/ping-ok');
    const res = await api('post', `/webhooks/${w.id}/test`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ success: true, data: { exitoso: true, statusCode: 200, durationMs: expect.any(Number) } });
    expect(Number.isInteger(res.body.data.durationMs)).toBe(true);
    expect(res.body.data.durationMs).toBeGreaterThanOrEqual(0);

    const [req, ...more] = receiver.requestsTo('/ping-ok');
    expect(more).toHaveLength(0);
    expect(req!.method).toBe('POST');
    const body = JSON.parse(req!.rawBody.toString('utf8'));
    expect(body).toEqual({ event: 'PING', timestamp: expect.stringMatching(ISO), webhookId: expect.stringMatching(UUID), data: {} });
    expect(req!.headers['content-type']).toBe('application/json');
    expect(req!.headers['x-svc-event']).toBe('PING');
    expect(req!.headers['x-svc-timestamp']).toBe(body.timestamp);
    expect(req!.headers['x-request-id']).toBe(body.webhookId);
    expect(req!.headers['user-agent']).toBe('SVC-Webhooks/1.0');
    expect(verify(req!.rawBody, req!.headers['x-svc-signature'], w.secret)).toBe(true);
    expect(verify(req!.rawBody, req!.headers['x-svc-signature'], `${w.secret}x`)).toBe(false);

    const detail = await api('get', `/webhooks/${w.id}`);
    expect(detail.body.data.entregas).toEqual([
      {
        id: body.webhookId,
        evento: 'PING',
        exitoso: true,
        statusCode: 200,
        intentos: 1,
        ultimoIntentoEn: body.timestamp,
        createdAt: body.timestamp,
      },
    ]);
    const list = await api('get', '/webhooks');
    const item = (list.body.data as Array<{ id: string; ultimoDelivery: unknown }>).find((x) => x.id === w.id);
    expect(item!.ultimoDelivery).toEqual({ exitoso: true, statusCode: 200, fecha: body.timestamp });
    await retire(w.id);
  });

  it('makes a single attempt when the receiver fails (no retries), and records it failed with its status', async () => {
    receiver.respond('/ping-500', { status: 500 });
    const w = await hook('/ping-500');
    const res = await api('post', `/webhooks/${w.id}/test`);
    expect(res.body.data).toEqual({ exitoso: false, statusCode: 500, durationMs: expect.any(Number) });
    await sleep(1500); // a retry would come 1 s later
    expect(receiver.requestsTo('/ping-500')).toHaveLength(1);
    const detail = await api('get', `/webhooks/${w.id}`);
    expect(detail.body.data.entregas).toEqual([expect.objectContaining({ evento: 'PING', exitoso: false, statusCode: 500, intentos: 1 })]);
    await retire(w.id);
  });

  it('does not follow a redirect: a 3xx is a failure with its status', async () => {
    receiver.respond('/ping-moved', { status: 302, location: '/ping-target' });
    const w = await hook('/ping-moved');
    const res = await api('post', `/webhooks/${w.id}/test`);
    expect(res.body.data).toMatchObject({ exitoso: false, statusCode: 302 });
    await sleep(200);
    expect(receiver.requestsTo('/ping-moved')).toHaveLength(1);
    expect(receiver.requestsTo('/ping-target')).toHaveLength(0);
    await retire(w.id);
  });

  it('refuses a name that resolves to a private address: statusCode 0, nothing sent, recorded', async () => {
    const res0 = await api('post', '/webhooks', c.live, { url: 'https://private.test/hook' });
    expect(res0.status).toBe(201);
    const id = res0.body.data.id as string;
    const before = receiver.connections;
    const res = await api('post', `/webhooks/${id}/test`);
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ exitoso: false, statusCode: 0 });
    expect(receiver.connections).toBe(before);
    const detail = await api('get', `/webhooks/${id}`);
    expect(detail.body.data.entregas[0]).toMatchObject({ exitoso: false, statusCode: 0, intentos: 1 });
    // The refusal as the tenant reads it: neither the address (10.1.2.3) nor its range (docs/integrators.md, The delivery log).
    const log = await api('get', `/webhooks/${id}/entregas`);
    expect(log.status).toBe(200);
    const attempts = log.body.data.entregas[0].intentosDetalle as Array<{ error: string; mensaje: string }>;
    expect(attempts).toEqual([expect.objectContaining({ statusCode: 0, error: 'BLOCKED_ADDRESS', mensaje: 'private.test resolves to a non-public address' })]);
    expect(JSON.stringify(log.body)).not.toMatch(/10\.1\.2\.3|private range/);
    const stored = await fx.pool.query<{ mensaje: string | null }>(
      'select i.mensaje from entrega_intentos i join entregas e on e.id = i.entrega_id where e.webhook_id = $1',
      [id],
    );
    expect(stored.rows).toEqual([{ mensaje: 'private.test resolves to a non-public address' }]);
    await retire(id);
  });

  it('a test token PINGs its own test webhook with X-SVC-Modo: test, and no live one', async () => {
    const created = await api('post', '/webhooks', c.test, { url: receiver.url('/ping-sandbox') });
    expect(created.status).toBe(201);
    const id = created.body.data.id as string;
    const res = await api('post', `/webhooks/${id}/test`, c.test);
    expect(res.body.data).toMatchObject({ exitoso: true, statusCode: 200 });
    const [req, ...more] = receiver.requestsTo('/ping-sandbox');
    expect(more).toHaveLength(0);
    expect(req!.headers['x-svc-modo']).toBe('test');
    expect(verify(req!.rawBody, req!.headers['x-svc-signature'], created.body.data.secret as string)).toBe(true);
    // Each token PINGs only its own mode's webhooks.
    const live = await hook('/ping-live-only');
    expect(await api('post', `/webhooks/${live.id}/test`, c.test)).toMatchObject({ status: 404, body: envelope('NOT_FOUND') });
    expect(await api('post', `/webhooks/${id}/test`, c.live)).toMatchObject({ status: 404, body: envelope('NOT_FOUND') });
    expect(receiver.requestsTo('/ping-live-only')).toHaveLength(0);
    expect(receiver.requestsTo('/ping-sandbox')).toHaveLength(1);
    await retire(live.id);
    await api('delete', `/webhooks/${id}`, c.test);
  });

  it('409 WEBHOOK_INACTIVE for a deactivated webhook; nothing is sent', async () => {
    const w = await hook('/ping-inactive');
    await retire(w.id);
    const res = await api('post', `/webhooks/${w.id}/test`);
    expect(res.status).toBe(409);
    expect(res.body).toEqual(envelope('WEBHOOK_INACTIVE'));
    expect(receiver.requestsTo('/ping-inactive')).toHaveLength(0);
  });

  it('keeps the detail to the 20 newest deliveries, newest first', async () => {
    const w = await hook('/ping-window');
    for (let i = 0; i < 23; i++) expect((await api('post', `/webhooks/${w.id}/test`)).body.data.exitoso).toBe(true);
    const sent = receiver.requestsTo('/ping-window').map((r) => r.headers['x-request-id']);
    expect(sent).toHaveLength(23);
    const detail = await api('get', `/webhooks/${w.id}`);
    const ids = (detail.body.data.entregas as Array<{ id: string }>).map((e) => e.id);
    expect(ids).toEqual(sent.slice(3).reverse());
    await retire(w.id);
  });

  it('never writes a webhook secret to the logs', async () => {
    const w = await hook('/ping-logs');
    await api('post', `/webhooks/${w.id}/test`);
    await api('get', `/webhooks/${w.id}`);
    const text = gw.logs.text();
    expect(text).toContain(w.id);
    expect(text).not.toContain(w.secret);
    expect(text).not.toMatch(/whsec_[A-Za-z0-9_-]{20,}/);
    await retire(w.id);
  });
});
