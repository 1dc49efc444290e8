import { connect } from 'node:net';
import { ADMIN_TOKEN, bearer, createCompany, startGatewayFixture, type GatewayFixture } from '../../../test/support/test-gateway';

/** One raw request, its status line and body. */
function rawRequest(port: number, target: string, token: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => {
      socket.write(`GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${bearer(token)}\r\nConnection: close\r\n\r\n`);
    });
    let text = '';
    socket.on('data', (b: Buffer) => (text += b.toString('utf8')));
    socket.on('error', reject);
    socket.on('end', () => resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), body: text.slice(text.indexOf('\r\n\r\n') + 4) }));
  });
}

describe('absolute-form request targets are not routed', () => {
  let fx: GatewayFixture;

  beforeAll(async () => {
    fx = await startGatewayFixture('request-target');
  });
  afterAll(() => fx?.stop());

  it('answers 404 with the envelope to GET http://x/<route>, which the path alone reaches', async () => {
    const c = await createCompany(fx.gw);
    expect((await rawRequest(fx.gw.port, '/api/v1/empresa', c.live)).status).toBe(200);
    expect((await rawRequest(fx.gw.port, `/internal/v1/empresas/${c.id}`, ADMIN_TOKEN)).status).toBe(200);
    for (const [target, token] of [
      ['http://x/api/v1/empresa', c.live],
      [`http://x/internal/v1/empresas/${c.id}`, ADMIN_TOKEN],
      [`HTTP://127.0.0.1/internal/v1/empresas/${c.id}`, ADMIN_TOKEN],
      ['*', c.live],
    ] as const) {
      const res = await rawRequest(fx.gw.port, target, token);
      expect({ target, status: res.status }).toEqual({ target, status: 404 });
      expect(JSON.parse(res.body)).toEqual({ success: false, error: { code: 'NOT_FOUND', message: expect.any(String) } });
    }
  });
});
