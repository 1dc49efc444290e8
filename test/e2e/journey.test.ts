import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { join } from 'node:path';
import pg from 'pg';
import { verify } from '@svc/webhook-signature';
import { adminUrl, TEST_DATABASE_BASE, testRedisEnv } from '../support/env';
import { eventually } from '../support/eventually';
import { startReceiver, type Receiver } from '../support/https-receiver';
import { verifyStandard } from '../support/standard-webhooks';
import { parseExposition, sampleSum } from '../support/prometheus-text';
import { dropPrefix, uniquePrefix } from '../support/redis-prefix';

/**
 * The project tried from outside, as an operator and an integrator would, through the two documents
 * only: `pnpm start` on a database that does not exist yet, the portal's internal routes, the public
 * API, a signed delivery to an HTTPS receiver on loopback (the test settings DISPATCH_HOST_MAP, DISPATCH_ALLOW_CIDRS and a test CA), tracking,
 * token rotation, both metrics ports, one request id followed through both services' logs, no token
 * or secret in any log line, and a graceful stop on SIGINT.
 */

const ROOT = join(__dirname, '../..');
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

interface Answer {
  status: number;
  headers: Headers;
  body: Record<string, unknown>;
}

describe('the whole stack through `pnpm start`', () => {
  const database = `svc_e2e_${randomBytes(5).toString('hex')}`;
  const admin = `e2e-admin-${randomBytes(16).toString('hex')}`;
  let prefix: string;
  let receiver: Receiver;
  let stack: ChildProcess;
  let output = '';
  let exited: Promise<number | null>;
  let port: number;
  let gatewayMetrics: number;
  let dispatcherMetrics: number;

  const call = async (method: string, path: string, token: string | undefined, body?: unknown, headers: Record<string, string> = {}): Promise<Answer> => {
    const res = await fetch(`http://127.0.0.1:${port}${path}`, {
      method,
      headers: {
        ...(token ? { Authorization: `Bearer ${token}` } : {}),
        ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
        ...headers,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> };
  };
  const data = <T = Record<string, unknown>>(a: Answer): T => a.body.data as T;
  const metricsOf = async (p: number) => parseExposition(await (await fetch(`http://127.0.0.1:${p}/metrics`)).text());
  /** The JSON log lines of one service, from the prefixed output of `pnpm start`. */
  const logsOf = (service: 'gateway' | 'dispatcher'): Array<Record<string, unknown>> =>
    output
      .split('\n')
      .filter((l) => l.startsWith(`[${service}] {`))
      .map((l) => JSON.parse(l.slice(service.length + 3)) as Record<string, unknown>);

  beforeAll(async () => {
    prefix = uniquePrefix('e2e');
    receiver = await startReceiver();
    [port, gatewayMetrics, dispatcherMetrics] = [await freePort(), await freePort(), await freePort()];
    stack = spawn('pnpm', ['start'], {
      cwd: ROOT,
      env: {
        ...process.env,
        DATABASE_URL: `${TEST_DATABASE_BASE}/${database}`,
        ...testRedisEnv(),
        REDIS_PREFIX: prefix,
        PORT: String(port),
        GATEWAY_METRICS_PORT: String(gatewayMetrics),
        DISPATCHER_METRICS_PORT: String(dispatcherMetrics),
        ADMIN_TOKEN: admin,
        DISPATCH_HOST_MAP: 'receiver.test=127.0.0.1',
        DISPATCH_ALLOW_CIDRS: '127.0.0.0/8',
        NODE_EXTRA_CA_CERTS: join(ROOT, '.test-certs/ca.pem'),
        // debug: a delivery's success line ('delivery finished') is written at debug level.
        LOG_LEVEL: 'debug',
        FORCE_COLOR: '0',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
      // Its own process group: a test that fails before the stack's stop can kill all of it
      // (pnpm, concurrently and both services), whose pipes would otherwise keep `close` away.
      detached: true,
    });
    stack.stdout!.on('data', (b: Buffer) => (output += b.toString('utf8')));
    stack.stderr!.on('data', (b: Buffer) => (output += b.toString('utf8')));
    exited = new Promise((resolve) => stack.once('close', (code) => resolve(code)));
    await eventually(
      async () => {
        if (stack.exitCode !== null) throw new Error(`pnpm start exited ${stack.exitCode}:\n${output}`);
        const ready = await Promise.all(
          [gatewayMetrics, dispatcherMetrics].map((p) =>
            fetch(`http://127.0.0.1:${p}/readyz`).then(
              (r) => r.status === 200,
              () => false,
            ),
          ),
        );
        return ready.every(Boolean);
      },
      60_000,
      'both services ready',
      200,
    );
  }, 90_000);

  afterAll(async () => {
    if (stack && stack.exitCode === null) {
      process.kill(-stack.pid!, 'SIGKILL');
      await exited;
    }
    await receiver?.close();
    await dropPrefix(prefix);
    const c = new pg.Client({ connectionString: adminUrl() });
    await c.connect();
    await c.query(`drop database if exists "${database}" with (force)`);
    await c.end();
  });

  it('serves an integrator from the first 401 to signed, traceable deliveries, then stops on SIGINT', async () => {
    // No header: the exact envelope, with the rate-limit headers.
    const anonymous = await call('GET', '/api/v1/empresa', undefined);
    expect(anonymous.status).toBe(401);
    expect(anonymous.body).toEqual({ success: false, error: { code: 'AUTH_REQUIRED', message: expect.any(String) } });
    expect(anonymous.headers.get('x-ratelimit-limit')).toBe('100');
    expect(await call('POST', '/internal/v1/empresas', 'wrong-admin', { nombre: 'X' })).toMatchObject({ status: 401 });

    // The portal: a verified company with credits, its tokens.
    const created = await call('POST', '/internal/v1/empresas', admin, { nombre: 'Envíos E2E', verificada: true, planActivo: true, creditos: 5 });
    expect(created.status).toBe(201);
    const empresaId = data<{ id: string }>(created).id;
    const tokens = await call('POST', `/internal/v1/empresas/${empresaId}/tokens`, admin);
    expect(tokens.status).toBe(201);
    const { live, test } = data<{ live: string; test: string }>(tokens);
    expect(live).toMatch(/^svc_live_/);
    expect(test).toMatch(/^svc_test_/);
    expect(data(await call('GET', '/api/v1/empresa', live))).toMatchObject({ id: empresaId, modo: 'live' });
    expect(data(await call('GET', '/api/v1/empresa', test))).toMatchObject({ id: empresaId, modo: 'test' });

    // A webhook on the loopback receiver; its secret only now.
    const hook = await call('POST', '/api/v1/webhooks', live, { url: receiver.url('/e2e'), eventos: [], descripcion: 'e2e' });
    expect(hook.status).toBe(201);
    const { id: hookId, secret } = data<{ id: string; secret: string }>(hook);
    expect(Object.keys(data(hook)).sort()).toEqual(['createdAt', 'descripcion', 'eventos', 'id', 'nota', 'secret', 'url']);

    // A shipment, traced by the caller's request id.
    const trace = `e2e-trace-${randomBytes(6).toString('hex')}`;
    const shipment = await call(
      'POST',
      '/api/v1/guias',
      live,
      { destinatario: { nombre: 'Ana', telefono: '55550000', direccion: 'Zona 1' }, paquete: { peso: 1.5 } },
      { 'X-Request-Id': trace },
    );
    expect(shipment.status).toBe(201);
    expect(shipment.headers.get('x-request-id')).toBe(trace);
    const { numeroGuia } = data<{ numeroGuia: string }>(shipment);

    // Its event, signed over the raw bytes, as the contract's payload and headers.
    const [creada] = await receiver.waitFor(1, 15_000, '/e2e');
    const payload = JSON.parse(creada!.rawBody.toString('utf8')) as Record<string, unknown>;
    expect(payload).toEqual({ event: 'GUIA_CREADA', timestamp: expect.stringMatching(ISO), webhookId: expect.stringMatching(UUID), data: { numeroGuia, estado: 'CREADA' } });
    expect(verify(creada!.rawBody, creada!.headers['x-svc-signature'], secret)).toBe(true);
    expect(creada!.headers).toMatchObject({
      'content-type': 'application/json',
      'x-svc-event': 'GUIA_CREADA',
      'x-svc-timestamp': payload.timestamp,
      'x-request-id': payload.webhookId,
      'user-agent': 'SVC-Webhooks/1.0',
    });

    // The courier moves it on; the event follows, and tracking holds the history.
    const moved = await call('POST', `/internal/v1/guias/${numeroGuia}/eventos`, admin, { evento: 'GUIA_RECOLECTADA' });
    expect(moved).toMatchObject({ status: 200, body: { success: true, data: { numeroGuia, estado: 'RECOLECTADA' } } });
    const [, recolectada] = await receiver.waitFor(2, 15_000, '/e2e');
    expect(JSON.parse(recolectada!.rawBody.toString('utf8'))).toMatchObject({ event: 'GUIA_RECOLECTADA', data: { numeroGuia, estado: 'RECOLECTADA' } });
    // Standard Webhooks too: the `standardwebhooks` package verifies both with the secret as issued;
    // each carries its place in the shipment's history and the mode.
    for (const [n, r] of [creada!, recolectada!].entries()) {
      expect(verifyStandard(r, secret)).toEqual(JSON.parse(r.rawBody.toString('utf8')));
      expect(r.headers).toMatchObject({ 'x-svc-secuencia': String(n + 1), 'x-svc-modo': 'live', 'webhook-id': expect.stringMatching(UUID) });
    }
    const tracking = data<{ historial: Array<{ estado: string; evento: string }> }>(await call('GET', `/api/v1/guias/${numeroGuia}/tracking`, live));
    expect(tracking).toMatchObject({ numeroGuia, estado: 'RECOLECTADA' });
    expect(tracking.historial.map((h) => [h.estado, h.evento])).toEqual([
      ['CREADA', 'GUIA_CREADA'],
      ['RECOLECTADA', 'GUIA_RECOLECTADA'],
    ]);

    // Both deliveries recorded in the webhook's detail, newest first.
    await eventually(
      async () => data<{ entregas: unknown[] }>(await call('GET', `/api/v1/webhooks/${hookId}`, live)).entregas.length === 2,
      10_000,
      'two entregas recorded',
    );
    const detail = data<{ entregas: Array<Record<string, unknown>> }>(await call('GET', `/api/v1/webhooks/${hookId}`, live));
    expect(detail.entregas.map((e) => [e.evento, e.exitoso, e.statusCode, e.intentos])).toEqual([
      ['GUIA_RECOLECTADA', true, 200, 1],
      ['GUIA_CREADA', true, 200, 1],
    ]);
    expect(detail.entregas[1]!.id).toBe(payload.webhookId);

    // Rotation: the old token stops at once.
    const rotated = data<{ live: string; test: string }>(await call('POST', `/internal/v1/empresas/${empresaId}/tokens`, admin));
    expect((await call('GET', '/api/v1/empresa', live)).status).toBe(401);
    expect((await call('GET', '/api/v1/empresa', rotated.live)).status).toBe(200);

    // The operator's view: both metrics ports moved.
    const gw = await metricsOf(gatewayMetrics);
    expect(sampleSum(gw, 'svc_http_requests_total', { route: '/api/v1/guias', method: 'POST', status: '201' })).toBe(1);
    await eventually(
      async () => sampleSum(await metricsOf(dispatcherMetrics), 'svc_webhook_deliveries_total', { outcome: 'success' }) === 2,
      10_000,
      'dispatcher counted two deliveries',
    );

    // One request id from the API to the receiver: the gateway's request line and the dispatcher's delivery line.
    await eventually(async () => logsOf('dispatcher').some((l) => l.requestId === trace && l.msg === 'delivery finished'), 10_000, 'delivery log line');
    expect(logsOf('gateway')).toContainEqual(expect.objectContaining({ requestId: trace, route: '/api/v1/guias', status: 201 }));
    expect(logsOf('dispatcher')).toContainEqual(
      expect.objectContaining({ requestId: trace, deliveryId: payload.webhookId, webhook: hookId, outcome: 'success', evento: 'GUIA_CREADA' }),
    );

    // The sandbox journey of docs/integrators.md: a test webhook, a sandbox shipment, `simular` to ENTREGADO,
    // every event received with X-SVC-Modo: test and verified; none reaches the live webhook.
    const sandboxHook = await call('POST', '/api/v1/webhooks', rotated.test, { url: receiver.url('/e2e-sandbox') });
    expect(sandboxHook.status).toBe(201);
    const sandboxSecret = data<{ secret: string }>(sandboxHook).secret;
    const sandbox = await call('POST', '/api/v1/guias', rotated.test, { destinatario: { nombre: 'Ana', telefono: '55550000', direccion: 'Zona 1' }, paquete: { peso: 1.5 } });
    expect(sandbox.status).toBe(201);
    const sandboxGuia = data<{ numeroGuia: string }>(sandbox).numeroGuia;
    const route = ['GUIA_RECOLECTADA', 'GUIA_EN_BODEGA', 'GUIA_EN_RUTA', 'GUIA_ENTREGADA'];
    for (const evento of route) expect((await call('POST', `/api/v1/guias/${sandboxGuia}/simular`, rotated.test, { evento })).status).toBe(200);
    expect((await call('POST', `/api/v1/guias/${numeroGuia}/simular`, rotated.live, { evento: 'GUIA_EN_BODEGA' })).status).toBe(403);
    const sandboxEvents = await receiver.waitFor(5, 15_000, '/e2e-sandbox');
    const inOrder = [...sandboxEvents].sort((x, y) => Number(x.headers['x-svc-secuencia']) - Number(y.headers['x-svc-secuencia']));
    expect(inOrder.map((r) => [JSON.parse(r.rawBody.toString('utf8')).event, r.headers['x-svc-secuencia'], r.headers['x-svc-modo']])).toEqual(
      ['GUIA_CREADA', ...route].map((evento, i) => [evento, String(i + 1), 'test']),
    );
    for (const r of inOrder) {
      expect(verify(r.rawBody, r.headers['x-svc-signature'], sandboxSecret)).toBe(true);
      expect(verifyStandard(r, sandboxSecret)).toMatchObject({ data: { numeroGuia: sandboxGuia } });
    }
    expect(receiver.requestsTo('/e2e')).toHaveLength(2);

    // Ctrl-C: both services stop gracefully and pnpm exits cleanly.
    stack.kill('SIGINT');
    let timer: NodeJS.Timeout | undefined;
    const code = await Promise.race([exited, new Promise<'late'>((r) => (timer = setTimeout(() => r('late'), 20_000)))]);
    clearTimeout(timer);
    expect(code).toBe(0);
    expect(output).toMatch(/\[gateway\].*stopping/);
    expect(output).toMatch(/\[dispatcher\].*stopping/);
    for (const secretValue of [live, test, rotated.live, rotated.test, secret, sandboxSecret, admin]) expect(output).not.toContain(secretValue);
  }, 120_000);
});
