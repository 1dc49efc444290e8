import request from 'supertest';
import { sql } from 'kysely';
import { READINESS_MAX_AGE_MS } from '@svc/platform';
import { eventually, sleep } from '../../../test/support/eventually';
import { parseExposition, sampleSum } from '../../../test/support/prometheus-text';
import type { TcpProxy } from '../../../test/support/tcp-proxy';
import { bearer, createCompany, startGatewayFixture, type GatewayFixture, type TestGateway } from '../../../test/support/test-gateway';
import { recordUnhandledRejections } from '../../../test/support/unhandled-rejections';

describe('gateway /healthz, /metrics and /readyz on the metrics port', () => {
  const unhandled = recordUnhandledRejections();
  let fx: GatewayFixture;
  let redisProxy: TcpProxy;
  let pgProxy: TcpProxy;
  let gw: TestGateway;
  let metricsPort: request.Agent;
  let token: string;

  beforeAll(async () => {
    // This instance reaches Redis and Postgres through proxies the test can break; nobody else does.
    fx = await startGatewayFixture('ready', { viaProxies: true });
    ({ gw } = fx);
    ({ redis: redisProxy, postgres: pgProxy } = await fx.proxies());
    metricsPort = request.agent(`http://127.0.0.1:${gw.metricsPort}`);
    token = (await createCompany(gw)).live;
  });
  afterAll(() => fx?.stop());

  const ready = async (): Promise<request.Response> => metricsPort.get('/readyz');
  const api = async (): Promise<request.Response> => gw.http.get('/api/v1/empresa').set('Authorization', bearer(token));

  it('GET /healthz answers 200 while the process runs', async () => {
    const res = await metricsPort.get('/healthz');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ok' });
  });

  it('GET /metrics answers the Prometheus text format with the svc_ metrics, route templates as labels', async () => {
    expect((await api()).status).toBe(200);
    const empresaId = (await gw.admin('post', '/empresas', { nombre: 'Métrica' })).body.data.id as string;
    expect((await gw.admin('get', `/empresas/${empresaId}`)).status).toBe(200);

    const res = await metricsPort.get('/metrics');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
    const families = parseExposition(res.text);

    for (const [name, type] of [
      ['svc_http_requests_total', 'counter'],
      ['svc_http_request_duration_seconds', 'histogram'],
      ['svc_rate_limit_rejections_total', 'counter'],
      ['svc_shipment_refusals_total', 'counter'],
      ['svc_auth_failures_total', 'counter'],
      ['svc_token_cache_lookups_total', 'counter'],
      ['svc_outbox_events_written_total', 'counter'],
      ['svc_outbox_pending', 'gauge'],
      ['svc_outbox_oldest_pending_age_seconds', 'gauge'],
      ['svc_process_cpu_seconds_total', 'counter'],
      ['svc_process_resident_memory_bytes', 'gauge'],
      ['svc_nodejs_eventloop_lag_seconds', 'gauge'],
    ] as const) {
      expect({ name, type: families.get(name)?.type }).toEqual({ name, type });
    }
    // Every family is the platform's, and every sample says which service it came from.
    expect([...families.keys()].filter((n) => !n.startsWith('svc_'))).toEqual([]);
    const samples = [...families.values()].flatMap((f) => f.samples);
    expect(samples.filter((s) => s.labels.service !== 'gateway')).toEqual([]);

    const route = '/internal/v1/empresas/:id';
    expect(sampleSum(families, 'svc_http_requests_total', { method: 'GET', route, status: '200' })).toBeGreaterThanOrEqual(1);
    expect(sampleSum(families, 'svc_http_request_duration_seconds_count', { method: 'GET', route })).toBeGreaterThanOrEqual(1);
    expect(sampleSum(families, 'svc_http_request_duration_seconds_bucket', { route, le: '+Inf' })).toBeGreaterThanOrEqual(1);
    expect(sampleSum(families, 'svc_http_requests_total', { route: '/api/v1/empresa', status: '200' })).toBeGreaterThanOrEqual(1);
    // Bounded labels: the id never becomes a label value.
    expect(res.text).not.toContain(empresaId);
    expect(sampleSum(families, 'svc_token_cache_lookups_total')).toBeGreaterThanOrEqual(1);
    // The outbox gauges read Postgres at scrape time: nothing is waiting in this fresh database.
    expect(families.get('svc_outbox_pending')?.samples).toEqual([expect.objectContaining({ value: 0 })]);
    expect(families.get('svc_outbox_oldest_pending_age_seconds')?.samples).toEqual([expect.objectContaining({ value: 0 })]);
  });

  it('GET /readyz answers 200 when Postgres and Redis answer', async () => {
    const res = await ready();
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ready', checks: { postgres: 'up', redis: 'up' } });
  });

  it('turns 503 within seconds when Redis goes away, keeps serving, and 200 again when it is back', async () => {
    redisProxy.cut();
    try {
      await eventually(async () => (await ready()).status === 503, 5000, '/readyz 503 after Redis stopped');
      const res = await ready();
      expect(res.body).toEqual({ status: 'unavailable', checks: { postgres: 'up', redis: 'down' } });
      // Still alive and answering: liveness, scrapes, and the API's own 503 envelope.
      expect((await metricsPort.get('/healthz')).status).toBe(200);
      expect((await metricsPort.get('/metrics')).status).toBe(200);
      const refused = await api();
      expect(refused.status).toBe(503);
      expect(refused.body).toEqual({ success: false, error: { code: 'SERVICE_UNAVAILABLE', message: expect.any(String) } });
    } finally {
      redisProxy.restore();
    }
    await eventually(async () => (await ready()).status === 200, 10_000, '/readyz 200 after Redis returned');
    expect((await ready()).body).toEqual({ status: 'ready', checks: { postgres: 'up', redis: 'up' } });
    await eventually(async () => (await api()).status === 200, 10_000, 'the API answering again');
  });

  it('turns 503 when Postgres goes away or hangs (the probe times out instead of hanging), and 200 when it is back', async () => {
    pgProxy.cut();
    try {
      await eventually(async () => (await ready()).status === 503, 5000, '/readyz 503 after Postgres stopped');
      expect((await ready()).body).toEqual({ status: 'unavailable', checks: { postgres: 'down', redis: 'up' } });
    } finally {
      pgProxy.restore();
    }
    await eventually(async () => (await ready()).status === 200, 10_000, '/readyz 200 after Postgres returned');

    // A server that accepts and never answers: the readiness check's own timeout decides.
    pgProxy.stall();
    try {
      // The answer of the last probe serves for up to READINESS_MAX_AGE_MS: past it, a new probe.
      await sleep(READINESS_MAX_AGE_MS);
      const started = Date.now();
      const res = await ready();
      expect(res.status).toBe(503);
      expect(res.body.checks).toEqual({ postgres: 'down', redis: 'up' });
      // Below the compose healthcheck's 3 s timeout, so the probe reports "down", not "no answer".
      expect(Date.now() - started).toBeLessThan(3000);
    } finally {
      pgProxy.restore();
    }
    await eventually(async () => (await ready()).status === 200, 10_000, '/readyz 200 after Postgres answered again');
    expect((await gw.admin('post', '/empresas', { nombre: 'Después' })).status).toBe(201);
  });

  it('survives Postgres dropping a connection in the middle of a transaction', async () => {
    // A checked-out pg client whose socket dies emits 'error'; without a listener that is an
    // uncaught exception, which kills a real process (the outbox sweep holds such transactions).
    let entered!: () => void;
    const inside = new Promise<void>((resolve) => (entered = resolve));
    const trx = gw.deps.db.transaction().execute(async (t) => {
      await sql`select 1`.execute(t);
      entered();
      await sql`select pg_sleep(5)`.execute(t);
    });
    await inside;
    pgProxy.cut();
    try {
      await expect(trx).rejects.toThrow();
      expect((await metricsPort.get('/healthz')).status).toBe(200);
    } finally {
      pgProxy.restore();
    }
    await eventually(async () => (await ready()).status === 200, 10_000, '/readyz 200 after Postgres returned');
  });

  it('did not let any failure escape as an unhandled rejection', () => {
    expect(unhandled).toEqual([]);
  });
});
