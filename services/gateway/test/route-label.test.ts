import { bearer, createCompany, startGatewayFixture, type Company, type GatewayFixture, type TestGateway } from '../../../test/support/test-gateway';
import { createOne, simulate } from '../../../test/support/shipment-fixtures';
import { parseExposition } from '../../../test/support/prometheus-text';
import type request from 'supertest';

const MISSING = '00000000-0000-4000-8000-000000000000';

describe('the route label and the access log on every path, errors included', () => {
  let fx: GatewayFixture;
  let gw: TestGateway;
  let company: Company;

  beforeAll(async () => {
    fx = await startGatewayFixture('route-label');
    ({ gw } = fx);
    company = await createCompany(gw, { planActivo: true, creditos: 100 });
  });
  afterAll(() => fx?.stop());

  const requestsTotal = async (): Promise<Array<{ labels: Record<string, string>; value: number }>> => {
    const text = await (await fetch(`http://127.0.0.1:${gw.metricsPort}/metrics`)).text();
    return parseExposition(text).get('svc_http_requests_total')!.samples;
  };
  const counted = async (method: string, route: string, status: number): Promise<number> =>
    (await requestsTotal()).find((s) => s.labels.method === method && s.labels.route === route && s.labels.status === String(status))?.value ?? 0;
  const logged = (res: request.Response): Record<string, unknown> | undefined =>
    gw.logs.lines
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .find((l) => l.msg === 'request' && l.requestId === res.headers['x-request-id']);

  /** Sends one request and checks its status, its sample under `route` and its log line. */
  async function expectLabelled(method: string, route: string, status: number, send: () => Promise<request.Response>): Promise<void> {
    const before = await counted(method, route, status);
    const res = await send();
    expect(res.status).toBe(status);
    expect(await counted(method, route, status)).toBe(before + 1);
    expect(logged(res)).toMatchObject({ method, route, status });
  }

  it('2xx under the full template, public and internal', async () => {
    await expectLabelled('GET', '/api/v1/empresa', 200, () => gw.http.get('/api/v1/empresa').set('Authorization', bearer(company.live)));
    await expectLabelled('POST', '/api/v1/guias', 201, () => createOne(gw, company.live));
    await expectLabelled('GET', '/internal/v1/empresas/:id', 200, () => gw.admin('get', `/empresas/${company.id}`));
  });

  it('409 under the full template (not "/guias" or "/webhooks/:id")', async () => {
    const created = await createOne(gw, company.test);
    const numero = created.body.data.numeroGuia as string;
    await expectLabelled('POST', '/api/v1/guias/:numeroGuia/simular', 409, () => simulate(gw, company.test, numero, { evento: 'GUIA_ENTREGADA' }));
    await expectLabelled('POST', '/internal/v1/guias/:numeroGuia/eventos', 409, () =>
      gw.admin('post', `/guias/${encodeURIComponent(numero)}/eventos`, { evento: 'GUIA_ENTREGADA' }),
    );
  });

  it('404 on an existing route template under that template', async () => {
    await expectLabelled('GET', '/api/v1/webhooks/:id', 404, () => gw.http.get(`/api/v1/webhooks/${MISSING}`).set('Authorization', bearer(company.live)));
    await expectLabelled('GET', '/internal/v1/empresas/:id', 404, () => gw.admin('get', `/empresas/${MISSING}`));
  });

  it('400 and 405 under the full template', async () => {
    await expectLabelled('POST', '/api/v1/guias', 400, () => createOne(gw, company.live, { destinatario: {} }));
    await expectLabelled('PATCH', '/internal/v1/empresas/:id', 400, () => gw.admin('patch', `/empresas/${company.id}`, {}));
    await expectLabelled('DELETE', '/api/v1/empresa', 405, () => gw.http.delete('/api/v1/empresa').set('Authorization', bearer(company.live)));
  });

  it('unrouted requests keep their mount point; outside every mount, "unmatched"', async () => {
    await expectLabelled('GET', '/api/v1/*', 404, () => gw.http.get('/api/v1/nada').set('Authorization', bearer(company.live)));
    await expectLabelled('GET', '/api/v1/*', 401, () => gw.http.get('/api/v1/empresa'));
    await expectLabelled('GET', '/internal/v1/*', 401, () => gw.http.get('/internal/v1/empresas/x'));
    await expectLabelled('GET', 'unmatched', 404, () => gw.http.get('/nada'));
  });

  it('no label is a bare router path', async () => {
    const routes = new Set((await requestsTotal()).map((s) => s.labels.route));
    for (const route of routes) expect(route).toMatch(/^(\/api\/v1\/|\/internal\/v1\/|unmatched$|\(unparsed\)$)/);
  });
});
