import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { randomUUID } from 'node:crypto';
import { CATALOG_EVENTS, EVENT_CATALOG, type EventoCatalogo } from '@svc/contracts';
import { attemptDelivery, createWebhookSender, type WebhookSender } from '@svc/webhook-sender';
import { deliveryProblems, startReceiver } from '../../../test/support/https-receiver';
import { bearer, createCompany, startGatewayFixture, type Company, type GatewayFixture } from '../../../test/support/test-gateway';
import { createWebhook } from '../../../test/support/webhook-fixtures';
import openApi from '../src/openapi/openapi.json';

let fx: GatewayFixture;
let company: Company;

beforeAll(async () => {
  fx = await startGatewayFixture('event-catalog', { receiver: true, env: { DISPATCH_HOST_MAP: 'receiver.test=127.0.0.1', DISPATCH_ALLOW_CIDRS: '127.0.0.0/8' } });
  company = await createCompany(fx.gw);
});
afterAll(() => fx?.stop());

describe('GET /api/v1/eventos', () => {
  it('answers the catalog to any token (checked against the OpenAPI document by the fixture), not to none; no-store like every /api answer', async () => {
    const live = await fx.gw.http.get('/api/v1/eventos').set('Authorization', bearer(company.live));
    expect(live.status).toBe(200);
    expect(live.headers['cache-control']).toBe('no-store');
    const items = (live.body as { data: EventoCatalogo[] }).data;
    expect(items.map((i) => i.evento)).toEqual([...CATALOG_EVENTS]);
    expect(items).toEqual(EVENT_CATALOG.map((e) => ({ ...e, schema: { $schema: 'https://json-schema.org/draft/2020-12/schema', ...e.schema } })));
    const test = await fx.gw.http.get('/api/v1/eventos').set('Authorization', bearer(company.test));
    expect(test.body).toEqual(live.body);
    expect((await fx.gw.http.get('/api/v1/eventos')).status).toBe(401);
    expect((await fx.gw.http.post('/api/v1/eventos').set('Authorization', bearer(company.live))).status).toBe(405);
  });

  it('each schema, as served, is a standalone draft 2020-12 document its example validates against', async () => {
    const res = await fx.gw.http.get('/api/v1/eventos').set('Authorization', bearer(company.live));
    const ajv = new Ajv2020({ strict: true });
    addFormats(ajv);
    for (const item of (res.body as { data: EventoCatalogo[] }).data) {
      expect({ [item.evento]: ajv.validate(item.schema, item.ejemplo) }).toEqual({ [item.evento]: true });
    }
  });

  it("the OpenAPI document's webhooks section: one entry per event with the catalog's very schema, example and the delivery headers", () => {
    const doc = openApi as unknown as {
      webhooks: Record<string, { post: { parameters: Array<{ name: string }>; requestBody: { content: { 'application/json': { schema: { $ref: string }; examples: Record<string, { value: unknown }> } } } } }>;
      components: { schemas: Record<string, unknown> };
    };
    expect(Object.keys(doc.webhooks)).toEqual(['evento', ...CATALOG_EVENTS]);
    for (const e of EVENT_CATALOG) {
      const op = doc.webhooks[e.evento]!.post;
      const media = op.requestBody.content['application/json'];
      expect(doc.components.schemas[media.schema.$ref.split('/').pop()!]).toEqual(e.schema);
      expect(media.examples.ejemplo!.value).toEqual(e.ejemplo);
      expect(op.parameters.map((p) => p.name)).toEqual([
        'X-SVC-Signature', 'X-SVC-Signature-Anterior', 'X-SVC-Event', 'X-SVC-Timestamp', 'X-Request-Id', 'User-Agent',
        'webhook-id', 'webhook-timestamp', 'webhook-signature', 'X-SVC-Modo', 'X-SVC-Secuencia',
      ]);
    }
  });
});

describe("the test receiver's catalog check (every suite's deliveries pass through it)", () => {
  let sender: WebhookSender;
  beforeAll(() => {
    sender = createWebhookSender({ hostMap: 'receiver.test=127.0.0.1', allowCidrs: '127.0.0.0/8', timeoutMs: 5000 });
  });
  afterAll(() => sender.close());

  const secret = `whsec_${Buffer.alloc(32, 3).toString('base64')}`;
  const input = (url: string, event: string, data: object) => ({ url, secret, previousSecret: null, deliveryId: randomUUID(), eventId: randomUUID(), event, data, sequence: 1, mode: 'test' as const });

  it("passes the gateway's real PING", async () => {
    const webhook = await createWebhook(fx.gw, company.live, fx.receiver!.url('/catalog-ping'));
    expect((await fx.gw.http.post(`/api/v1/webhooks/${webhook.id}/test`).set('Authorization', bearer(company.live))).status).toBe(200);
    const [ping] = await fx.receiver!.waitFor(1, 5000, '/catalog-ping');
    expect(deliveryProblems(ping!)).toEqual([]);
  });

  it('refuses a delivery its event\'s schema refuses, and then fails the close', async () => {
    const receiver = await startReceiver();
    await attemptDelivery(sender, input(receiver.url('/ok'), 'GUIA_EN_RUTA', { numeroGuia: 'SVC1', estado: 'EN_RUTA' }));
    expect(receiver.catalogProblems).toEqual([]);
    await attemptDelivery(sender, input(receiver.url('/drift'), 'GUIA_ENTREGADA', { numeroGuia: 'SVC1', estado: 'ENTREGADO' }));
    expect(receiver.catalogProblems).toEqual([expect.stringMatching(/^\/drift: GUIA_ENTREGADA: \/data must have required property 'fechaEntrega'/)]);
    await expect(receiver.close()).rejects.toThrow(/1 deliveries do not match the event catalog/);
  });

  it('checks an operator notice ({ event, timestamp, empresaId, data }) by its data; leaves alone what is no delivery', async () => {
    const request = (headers: Record<string, string>, body: unknown) => ({ path: '/n', headers, rawBody: Buffer.from(JSON.stringify(body)) });
    const notice = EVENT_CATALOG.find((e) => e.evento === 'WEBHOOK_DESACTIVADO')!.ejemplo;
    const { webhookId: _unused, ...rest } = notice;
    const headers = { 'x-svc-event': 'WEBHOOK_DESACTIVADO', 'webhook-id': randomUUID() };
    expect(deliveryProblems(request(headers, { ...rest, empresaId: randomUUID() }))).toEqual([]);
    expect(deliveryProblems(request(headers, { ...rest, empresaId: randomUUID(), data: {} }))).not.toEqual([]);
    expect(deliveryProblems(request({ ...headers, 'x-svc-event': 'PING' }, notice))).toEqual([expect.stringContaining('X-SVC-Event PING but the body\'s event is "WEBHOOK_DESACTIVADO"')]);
    expect(deliveryProblems(request({}, { anything: true }))).toEqual([]);
  });
});
