import { bearer, createCompany, startGatewayFixture, type Company, type GatewayFixture, type TestGateway } from '../../../test/support/test-gateway';

// Answers are written with one JSON.stringify and res.end (http/send-json.ts) rather than express's
// res.json: the status, headers and bytes must be what res.json wrote, on every kind of answer.
describe('the headers and bytes of JSON answers', () => {
  let fx: GatewayFixture;
  let gw: TestGateway;
  let company: Company;

  beforeAll(async () => {
    fx = await startGatewayFixture('response-headers');
    ({ gw } = fx);
    // Not ASCII: Content-Length counts bytes, not characters.
    company = await createCompany(gw, { nombre: 'Mensajería Ñandú — “Café”' });
  });
  afterAll(() => fx?.stop());

  function expectJsonHeaders(res: { headers: Record<string, string>; text: string }): void {
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(res.headers['content-length']).toBe(String(Buffer.byteLength(res.text, 'utf8')));
    expect(res.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    // Neither is in the contract: no ETag (express would hash every body for it), no X-Powered-By.
    expect(res.headers.etag).toBeUndefined();
    expect(res.headers['x-powered-by']).toBeUndefined();
  }

  it('GET /api/v1/empresa: 200, the exact body, and the JSON and rate-limit headers', async () => {
    const res = await gw.http.get('/api/v1/empresa').set('Authorization', bearer(company.live));
    expect(res.status).toBe(200);
    expectJsonHeaders(res);
    expect(res.text).toBe(
      JSON.stringify({
        success: true,
        data: { id: company.id, nombre: 'Mensajería Ñandú — “Café”', sucursalesHabilitadas: false, sucursal: null, modo: 'live' },
      }),
    );
    expect(res.headers['x-ratelimit-limit']).toBe('100');
    expect(res.headers['x-ratelimit-remaining']).toBe('99');
    expect(res.headers['x-ratelimit-reset']).toMatch(/^\d+$/);
  });

  it('HEAD /api/v1/empresa: the headers of the GET, Content-Length included, and no body', async () => {
    const get = await gw.http.get('/api/v1/empresa').set('Authorization', bearer(company.test));
    const head = await gw.http.head('/api/v1/empresa').set('Authorization', bearer(company.test));
    expect(head.status).toBe(200);
    expect(head.text ?? '').toBe('');
    expect(head.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(head.headers['content-length']).toBe(get.headers['content-length']);
    expect(Number(head.headers['x-ratelimit-remaining'])).toBe(Number(get.headers['x-ratelimit-remaining']) - 1);
  });

  it('created (201) and error answers (401, 404, 405) carry the same headers', async () => {
    const created = await gw.admin('post', '/empresas', { nombre: 'Otra', verificada: true });
    expect(created.status).toBe(201);
    expectJsonHeaders(created);
    const answers = [
      await gw.http.get('/api/v1/empresa'),
      await gw.http.get('/api/v1/nada').set('Authorization', bearer(company.live)),
      await gw.http.delete('/api/v1/empresa').set('Authorization', bearer(company.live)),
    ];
    expect(answers.map((r) => r.status)).toEqual([401, 404, 405]);
    for (const res of answers) {
      expectJsonHeaders(res);
      expect(res.body).toEqual({ success: false, error: { code: expect.any(String), message: expect.any(String) } });
    }
    expect(answers[2]!.headers.allow).toBe('GET');
  });
});
