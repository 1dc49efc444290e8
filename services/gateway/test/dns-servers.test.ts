import { startFakeDns, type FakeDns } from '../../../packages/webhook-sender/test/support/fake-dns.server';
import { createBatch, guia } from '../../../test/support/shipment-fixtures';
import { eventually } from '../../../test/support/eventually';
import { bearer, createCompany, type Company } from '../../../test/support/test-gateway';
import { startDispatcherFixture, type DispatcherFixture } from '../../../test/support/test-dispatcher';
import type { EntregaDetalle } from '../../../test/support/webhook-fixtures';

/**
 * DISPATCH_DNS_SERVERS: both services resolve webhook hosts through the name servers it names (here
 * one on UDP 127.0.0.1 that knows one internal name), not through the system's resolvers.
 */
describe('DISPATCH_DNS_SERVERS', () => {
  let dns: FakeDns;
  let fx: DispatcherFixture;
  let c: Company;

  const log = async (webhookId: string): Promise<EntregaDetalle[]> => {
    const res = await fx.gw.http.get(`/api/v1/webhooks/${webhookId}/entregas`).set('Authorization', bearer(c.live));
    expect(res.status).toBe(200);
    return (res.body.data as { entregas: EntregaDetalle[] }).entregas;
  };
  const createWebhook = async (url: string): Promise<string> => {
    const res = await fx.gw.http.post('/api/v1/webhooks').set('Authorization', bearer(c.live)).send({ url });
    expect(res.status).toBe(201);
    return res.body.data.id as string;
  };

  beforeAll(async () => {
    dns = await startFakeDns({ 'internal.test': { a: ['10.0.0.5'] } });
    const env = { DISPATCH_DNS_SERVERS: dns.server, DISPATCH_HOST_MAP: 'receiver.test=127.0.0.1', DISPATCH_ALLOW_CIDRS: '127.0.0.0/8' };
    fx = await startDispatcherFixture('dnsservers', { dispatchers: 1, gateway: { env }, dispatcher: { env } });
    c = await createCompany(fx.gw, { planActivo: true, creditos: 100 });
  });
  afterAll(async () => {
    await fx?.stop();
    await dns?.close();
  });

  it.each([
    ['internal.test', 'BLOCKED_ADDRESS', 'internal.test resolves to a non-public address'],
    ['unknown.test', 'DNS', 'cannot resolve unknown.test: no such name (ENOTFOUND)'],
  ])("the gateway's PING to %s asks that name server: %s", async (host, error, mensaje) => {
    const asked = dns.count(host, 'A');
    const id = await createWebhook(`https://${host}/hook`);
    const ping = await fx.gw.http.post(`/api/v1/webhooks/${id}/test`).set('Authorization', bearer(c.live));
    expect(ping.body.data).toEqual({ exitoso: false, statusCode: 0, durationMs: expect.any(Number) });
    expect(dns.count(host, 'A')).toBeGreaterThan(asked);
    const [d] = await log(id);
    expect(d!.intentosDetalle).toEqual([expect.objectContaining({ statusCode: 0, error, mensaje, respuesta: null })]);
    expect((await fx.gw.http.delete(`/api/v1/webhooks/${id}`).set('Authorization', bearer(c.live))).status).toBe(200);
  });

  it("the dispatcher's deliveries ask it too", async () => {
    const id = await createWebhook('https://internal.test/events');
    const asked = dns.count('internal.test', 'A');
    expect((await createBatch(fx.gw, c.live, [guia(1)])).status).toBe(201);
    await eventually(async () => ((await log(id))[0]?.intentosDetalle.length ?? 0) >= 1, 15_000, 'a first attempt');
    const [d] = await log(id);
    expect(d!.intentosDetalle[0]).toMatchObject({ statusCode: 0, error: 'BLOCKED_ADDRESS', mensaje: 'internal.test resolves to a non-public address' });
    expect(dns.count('internal.test', 'A')).toBeGreaterThan(asked);
  }, 20_000);
});
