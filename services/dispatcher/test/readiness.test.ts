import request from 'supertest';
import { JOBS } from '@svc/contracts';
import { eventually, sleep } from '../../../test/support/eventually';
import type { Receiver } from '../../../test/support/https-receiver';
import { parseExposition, sampleSum, type Family } from '../../../test/support/prometheus-text';
import { guia } from '../../../test/support/shipment-fixtures';
import type { TcpProxy } from '../../../test/support/tcp-proxy';
import { bearer, createCompany, type Company, type TestGateway } from '../../../test/support/test-gateway';
import { startDispatcherFixture, type DispatcherFixture } from '../../../test/support/test-dispatcher';
import { recordUnhandledRejections } from '../../../test/support/unhandled-rejections';
import { QUEUE_STATES } from '../src/observability/dispatcher-metrics';

describe('dispatcher /healthz, /metrics and /readyz on the metrics port', () => {
  const unhandled = recordUnhandledRejections();
  let fx: DispatcherFixture;
  let receiver: Receiver;
  let redisProxy: TcpProxy;
  let pgProxy: TcpProxy;
  let gw: TestGateway;
  let metricsPort: request.Agent;
  let company: Company;

  beforeAll(async () => {
    // Only the dispatcher goes through the proxies: the gateway keeps taking shipments while the
    // dispatcher's Redis or Postgres is away.
    fx = await startDispatcherFixture('dready', { dispatcher: { viaProxies: true } });
    ({ receiver, gw } = fx);
    ({ redis: redisProxy, postgres: pgProxy } = await fx.proxies());
    metricsPort = request.agent(`http://127.0.0.1:${fx.dispatcher.metricsPort}`);
    company = await createCompany(gw, { planActivo: true, creditos: 100 });
    const hook = await gw.http
      .post('/api/v1/webhooks')
      .set('Authorization', bearer(company.live))
      .send({ url: receiver.url('/hook'), eventos: [] });
    if (hook.status !== 201) throw new Error(`webhook: ${hook.status} ${JSON.stringify(hook.body)}`);
  });
  afterAll(() => fx?.stop());

  const ready = async (): Promise<request.Response> => metricsPort.get('/readyz');
  const scrape = async (port: request.Agent = metricsPort): Promise<Map<string, Family>> => {
    const res = await port.get('/metrics');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
    return parseExposition(res.text);
  };
  const ship = async (): Promise<string> => {
    const res = await gw.http.post('/api/v1/guias').set('Authorization', bearer(company.live)).send(guia());
    if (res.status !== 201) throw new Error(`shipment: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body.data.numeroGuia as string;
  };
  const deliveredTo = (numeroGuia: string): number =>
    receiver.requests.filter((r) => r.path === '/hook' && r.rawBody.toString('utf8').includes(numeroGuia)).length;

  it('GET /healthz answers 200 and /readyz 200 when Postgres and Redis answer', async () => {
    const health = await metricsPort.get('/healthz');
    expect(health.status).toBe(200);
    expect(health.body).toEqual({ status: 'ok' });
    const res = await ready();
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ready', checks: { postgres: 'up', redis: 'up' } });
  });

  it('after a delivery, both services’ counters have moved and the histograms have counts', async () => {
    const numeroGuia = await ship();
    await eventually(async () => deliveredTo(numeroGuia) === 1, 10_000, 'the GUIA_CREADA delivery');

    // The delivery is counted when it ends, just after the receiver's answer: poll the scrape.
    let families = await scrape();
    await eventually(
      async () => {
        families = await scrape();
        return sampleSum(families, 'svc_webhook_deliveries_total', { evento: 'GUIA_CREADA', outcome: 'success' }) === 1;
      },
      5000,
      'svc_webhook_deliveries_total{outcome="success"}',
    );
    expect(families.get('svc_webhook_deliveries_total')?.type).toBe('counter');
    expect(sampleSum(families, 'svc_webhook_deliveries_total', { outcome: 'failure' })).toBe(0);
    expect(sampleSum(families, 'svc_webhook_attempts_total', { result: '2xx' })).toBe(1);
    expect(families.get('svc_webhook_attempt_duration_seconds')?.type).toBe('histogram');
    expect(sampleSum(families, 'svc_webhook_attempt_duration_seconds_count')).toBe(1);
    expect(sampleSum(families, 'svc_webhook_attempt_duration_seconds_bucket', { le: '+Inf' })).toBe(1);
    expect(sampleSum(families, 'svc_event_to_delivery_seconds_count')).toBe(1);
    expect(sampleSum(families, 'svc_event_to_delivery_seconds_sum')).toBeGreaterThan(0);
    // Queue depth: both queues, every state, read from Redis at scrape time.
    const depth = families.get('svc_queue_jobs')?.samples ?? [];
    for (const queue of [JOBS.shipmentEvent.queue, JOBS.delivery.queue]) {
      expect(depth.filter((s) => s.labels.queue === queue).map((s) => s.labels.state).sort()).toEqual([...QUEUE_STATES].sort());
    }
    for (const name of ['svc_process_cpu_seconds_total', 'svc_process_resident_memory_bytes', 'svc_nodejs_eventloop_lag_seconds']) {
      expect({ name, present: families.has(name) }).toEqual({ name, present: true });
    }
    expect([...families.keys()].filter((n) => !n.startsWith('svc_'))).toEqual([]);
    const samples = [...families.values()].flatMap((f) => f.samples);
    expect(samples.filter((s) => s.labels.service !== 'dispatcher')).toEqual([]);

    // The gateway's side of the same shipment.
    const gateway = await scrape(request.agent(`http://127.0.0.1:${gw.metricsPort}`));
    expect(sampleSum(gateway, 'svc_http_requests_total', { method: 'POST', route: '/api/v1/guias', status: '201' })).toBe(1);
    expect(sampleSum(gateway, 'svc_http_request_duration_seconds_count', { method: 'POST', route: '/api/v1/guias' })).toBe(1);
    expect(sampleSum(gateway, 'svc_outbox_events_written_total', { evento: 'GUIA_CREADA' })).toBe(1);
  });

  it('turns 503 within seconds when Redis goes away, keeps running, and resumes deliveries when it is back', async () => {
    redisProxy.cut();
    let numeroGuia: string;
    try {
      await eventually(async () => (await ready()).status === 503, 5000, '/readyz 503 after Redis stopped');
      expect((await ready()).body).toEqual({ status: 'unavailable', checks: { postgres: 'up', redis: 'down' } });
      expect((await metricsPort.get('/healthz')).status).toBe(200);
      expect((await metricsPort.get('/metrics')).status).toBe(200);
      // Shipments keep coming through the gateway meanwhile; their events wait in the queue.
      numeroGuia = await ship();
      await sleep(500);
      expect(deliveredTo(numeroGuia)).toBe(0); // this dispatcher really is cut off
    } finally {
      redisProxy.restore();
    }
    await eventually(async () => (await ready()).status === 200, 10_000, '/readyz 200 after Redis returned');
    expect((await ready()).body).toEqual({ status: 'ready', checks: { postgres: 'up', redis: 'up' } });
    await eventually(async () => deliveredTo(numeroGuia) === 1, 20_000, 'the delivery of the event queued during the outage');
  });

  it('turns 503 when Postgres goes away, and 200 when it is back; the event waiting meanwhile is delivered', async () => {
    pgProxy.cut();
    let numeroGuia: string;
    try {
      await eventually(async () => (await ready()).status === 503, 5000, '/readyz 503 after Postgres stopped');
      expect((await ready()).body).toEqual({ status: 'unavailable', checks: { postgres: 'down', redis: 'up' } });
      expect((await metricsPort.get('/healthz')).status).toBe(200);
      // The fan-out needs Postgres: it fails and the queue retries it with backoff.
      numeroGuia = await ship();
      await sleep(500);
      expect(deliveredTo(numeroGuia)).toBe(0);
    } finally {
      pgProxy.restore();
    }
    await eventually(async () => (await ready()).status === 200, 10_000, '/readyz 200 after Postgres returned');
    await eventually(async () => deliveredTo(numeroGuia) === 1, 20_000, 'the delivery of the event that waited for Postgres');
  });

  it('did not let any failure escape as an unhandled rejection', () => {
    expect(unhandled).toEqual([]);
  });
});
