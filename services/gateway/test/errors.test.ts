import { request as httpRequest } from 'node:http';
import { gzipSync } from 'node:zlib';
import pg from 'pg';
import { eventually } from '../../../test/support/eventually';
import { ADMIN_TOKEN, bearer, createCompany, startGatewayFixture, type GatewayFixture, type TestGateway } from '../../../test/support/test-gateway';

const envelope = (code: string) => ({ success: false, error: { code, message: expect.any(String) } });

describe('the error envelope', () => {
  let fx: GatewayFixture;
  let gw: TestGateway;
  let token: string;

  beforeAll(async () => {
    fx = await startGatewayFixture('errors');
    ({ gw } = fx);
    token = (await createCompany(gw)).live;
  });
  afterAll(() => fx?.stop());

  it('404 NOT_FOUND for unknown routes, inside and outside the API', async () => {
    for (const path of ['/api/v1/nada', '/api/v1/empresa/extra', '/nada', '/']) {
      const res = await gw.http.get(path).set('Authorization', bearer(token));
      expect(res.status).toBe(404);
      expect(res.body).toEqual(envelope('NOT_FOUND'));
    }
    const internal = await gw.admin('get', '/nada');
    expect(internal.status).toBe(404);
    expect(internal.body).toEqual(envelope('NOT_FOUND'));
  });

  it('404 NOT_FOUND, not 500, for a path parameter that is not validly percent-encoded', async () => {
    const api = await gw.http.get('/api/v1/guias/%E0%A4%A/tracking').set('Authorization', bearer(token));
    expect(api.status).toBe(404);
    expect(api.body).toEqual(envelope('NOT_FOUND'));
    const internal = await gw.admin('get', '/empresas/%ZZ');
    expect(internal.status).toBe(404);
    expect(internal.body).toEqual(envelope('NOT_FOUND'));
    expect(gw.logs.text()).not.toContain('unhandled error');
  });

  it('404 NOT_FOUND for a company that does not exist, or an id that is not one', async () => {
    for (const id of ['00000000-0000-4000-8000-000000000000', 'not-a-uuid']) {
      const res = await gw.admin('get', `/empresas/${id}`);
      expect(res.status).toBe(404);
      expect(res.body).toEqual(envelope('NOT_FOUND'));
    }
  });

  it('405 METHOD_NOT_ALLOWED with Allow for a known path and another method', async () => {
    const res = await gw.http.delete('/api/v1/empresa').set('Authorization', bearer(token));
    expect(res.status).toBe(405);
    expect(res.headers.allow).toBe('GET');
    expect(res.body).toEqual(envelope('METHOD_NOT_ALLOWED'));
    const internal = await gw.admin('delete', '/empresas');
    expect(internal.status).toBe(405);
    expect(internal.headers.allow).toBe('POST');
  });

  it('400 INVALID_JSON for a body that does not parse', async () => {
    const res = await gw.http
      .post('/internal/v1/empresas')
      .set('Authorization', `Bearer ${ADMIN_TOKEN}`)
      .set('Content-Type', 'application/json')
      .send('{"nombre": ');
    expect(res.status).toBe(400);
    expect(res.body).toEqual(envelope('INVALID_JSON'));
  });

  it('400 INVALID_JSON, not 500, for a compressed body that does not inflate; a good one is read', async () => {
    for (const encoding of ['gzip', 'deflate', 'br']) {
      const res = await gw.http
        .post('/internal/v1/empresas')
        .set('Authorization', `Bearer ${ADMIN_TOKEN}`)
        .set('Content-Type', 'application/json')
        .set('Content-Encoding', encoding)
        .send('{"nombre": "not compressed"}');
      expect(res.status).toBe(400);
      expect(res.body).toEqual(envelope('INVALID_JSON'));
    }
    // fetch, because superagent serialises a Buffer body sent as application/json.
    const good = await fetch(`http://127.0.0.1:${gw.port}/internal/v1/empresas`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${ADMIN_TOKEN}`, 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' },
      body: gzipSync('{"nombre": "comprimida"}'),
    });
    expect(good.status).toBe(201);
    expect(((await good.json()) as { data: { nombre: string } }).data.nombre).toBe('comprimida');
    expect(gw.logs.text()).not.toContain('unhandled error');
  });

  it('400 VALIDATION_ERROR naming the field: missing, wrong type, unknown, out of range', async () => {
    const cases: Array<[unknown, RegExp]> = [
      [{}, /nombre/],
      [{ nombre: 5 }, /nombre/],
      [{ nombre: 'x', color: 'rojo' }, /color/],
      [{ nombre: 'x', limiteDiario: -1 }, /limiteDiario/],
      [{ nombre: 'x', planPersonalizado: 'GRATIS' }, /planPersonalizado must be one of PENDIENTE, APROBADA, RECHAZADA, null$/],
      [{ nombre: 'a\u0000b' }, /nombre must not contain NUL/],
      [[1, 2], /object/],
    ];
    for (const [body, field] of cases) {
      const res = await gw.admin('post', '/empresas', body);
      expect(res.status).toBe(400);
      expect(res.body).toEqual(envelope('VALIDATION_ERROR'));
      expect(res.body.error.message).toMatch(field);
    }
    const empty = await gw.admin('post', '/empresas');
    expect(empty.status).toBe(400);
    expect(empty.body).toEqual(envelope('VALIDATION_ERROR'));
  });

  it('413 PAYLOAD_TOO_LARGE over 1 MiB', async () => {
    const res = await gw.admin('post', '/empresas', { nombre: 'x'.repeat(1024 * 1024 + 10) });
    expect(res.status).toBe(413);
    expect(res.body).toEqual(envelope('PAYLOAD_TOO_LARGE'));
  });

  it('415 UNSUPPORTED_MEDIA_TYPE for a body that is not JSON', async () => {
    const res = await gw.http
      .post('/internal/v1/empresas')
      .set('Authorization', `Bearer ${ADMIN_TOKEN}`)
      .set('Content-Type', 'text/plain')
      .send('nombre=x');
    expect(res.status).toBe(415);
    expect(res.body).toEqual(envelope('UNSUPPORTED_MEDIA_TYPE'));
  });

  it('a chunked body without a Content-Type is no body when empty (not 415), and 415 when it has bytes', async () => {
    const chunked = (path: string, chunks: string[]) =>
      new Promise<{ status: number; body: { error?: { code: string } } }>((resolve, reject) => {
        const req = httpRequest(
          { host: '127.0.0.1', port: gw.port, method: 'POST', path, headers: { Authorization: `Bearer ${ADMIN_TOKEN}`, 'Transfer-Encoding': 'chunked' } },
          (res) => {
            let text = '';
            res.setEncoding('utf8').on('data', (c: string) => (text += c));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as { error?: { code: string } } }));
          },
        );
        req.on('error', reject);
        for (const c of chunks) req.write(c);
        req.end();
      });
    const created = await gw.admin('post', '/empresas', { nombre: 'Chunked', verificada: true });
    const tokens = await chunked(`/internal/v1/empresas/${created.body.data.id}/tokens`, []);
    expect(tokens.status).toBe(201);
    const missing = await chunked('/internal/v1/empresas', []);
    expect(missing.status).toBe(400);
    expect(missing.body).toEqual(envelope('VALIDATION_ERROR'));
    const text = await chunked('/internal/v1/empresas', ['nombre=', 'x']);
    expect(text.status).toBe(415);
    expect(text.body).toEqual(envelope('UNSUPPORTED_MEDIA_TYPE'));
  });

  it('401 AUTH_REQUIRED on the internal routes without the admin token', async () => {
    expect((await gw.http.get('/internal/v1/empresas/x')).body).toEqual(envelope('AUTH_REQUIRED'));
    const wrong = await gw.http.post('/internal/v1/empresas').set('Authorization', bearer(token)).send({ nombre: 'x' });
    expect(wrong.status).toBe(401);
    expect(wrong.body).toEqual(envelope('AUTH_REQUIRED'));
  });

  it('409 EMPRESA_NO_VERIFICADA and SUCURSALES_DESHABILITADAS from the portal', async () => {
    const created = await gw.admin('post', '/empresas', { nombre: 'Sin verificar' });
    const id = created.body.data.id as string;
    const tokens = await gw.admin('post', `/empresas/${id}/tokens`);
    expect(tokens.status).toBe(409);
    expect(tokens.body).toEqual(envelope('EMPRESA_NO_VERIFICADA'));
    const branch = await gw.admin('post', `/empresas/${id}/sucursales`, { nombre: 'Z1' });
    expect(branch.status).toBe(409);
    expect(branch.body).toEqual(envelope('SUCURSALES_DESHABILITADAS'));
  });

  it('500 INTERNAL_ERROR without internals, logged with the request id', async () => {
    const c = new pg.Client({ connectionString: fx.database.url });
    await c.connect();
    await c.query('alter table sucursales rename to sucursales_rotas');
    try {
      const created = await gw.admin('post', '/empresas', { nombre: 'Rota', verificada: true, sucursalesHabilitadas: true });
      const res = await gw.admin('post', `/empresas/${created.body.data.id}/sucursales`, { nombre: 'Z1' });
      expect(res.status).toBe(500);
      expect(res.body).toEqual(envelope('INTERNAL_ERROR'));
      expect(JSON.stringify(res.body)).not.toMatch(/sucursales|relation|stack|at /);
      const requestId = res.headers['x-request-id'] as string;
      expect(res.body.error.message).toContain(requestId);
      expect(gw.logs.lines.some((l) => l.includes(requestId) && l.includes('unhandled error'))).toBe(true);
    } finally {
      await c.query('alter table sucursales_rotas rename to sucursales');
      await c.end();
    }
  });

  it('503 SERVICE_UNAVAILABLE when Redis is unreachable, and back when it returns', async () => {
    gw.deps.redis.disconnect();
    const res = await gw.http.get('/api/v1/empresa').set('Authorization', bearer(token));
    expect(res.status).toBe(503);
    expect(res.body).toEqual(envelope('SERVICE_UNAVAILABLE'));
    // The socket's close lands a moment after disconnect(): connect() before it is refused.
    await eventually(async () => gw.deps.redis.status === 'end', 5000, 'Redis client closed');
    await gw.deps.redis.connect();
    expect((await gw.http.get('/api/v1/empresa').set('Authorization', bearer(token))).status).toBe(200);
  });

  it('503 SERVICE_UNAVAILABLE when Postgres is unreachable', async () => {
    // A second instance whose Postgres does not answer; the fixture stops it and drops its Redis keys.
    const other = await fx.addGateway({ databaseUrl: 'postgres://postgres@127.0.0.1:1/nada' });
    const res = await other.admin('post', '/empresas', { nombre: 'x' });
    expect(res.status).toBe(503);
    expect(res.body).toEqual(envelope('SERVICE_UNAVAILABLE'));
    const api = await other.http.get('/api/v1/empresa').set('Authorization', bearer(token));
    expect(api.status).toBe(503);
  });
});
