import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadGatewayConfig } from '../src/config';
import { startGatewayFixture, type GatewayFixture, type TestGateway } from '../../../test/support/test-gateway';

/** A stand-in for the portal's build (services/portal/dist): a page and a hashed asset. */
function fakeBuild(): string {
  const dir = mkdtempSync(join(tmpdir(), 'svc-portal-build-'));
  mkdirSync(join(dir, 'assets'));
  writeFileSync(join(dir, 'index.html'), '<!doctype html><html lang="es"><script type="module" src="/portal/assets/index-abc123.js"></script></html>');
  writeFileSync(join(dir, 'assets/index-abc123.js'), 'console.log("portal")');
  writeFileSync(join(dir, 'favicon.svg'), '<svg xmlns="http://www.w3.org/2000/svg"/>');
  return dir;
}

describe('the portal’s pages, served by the gateway at /portal/', () => {
  let fx: GatewayFixture;
  let gw: TestGateway;
  let framed: TestGateway;
  let dir: string;

  beforeAll(async () => {
    dir = fakeBuild();
    fx = await startGatewayFixture('portal-static', { env: { PORTAL_ASSETS_DIR: dir } });
    gw = fx.gw;
    framed = await fx.addGateway({ env: { PORTAL_ASSETS_DIR: dir, PORTAL_FRAME_ANCESTORS: 'https://www.courier.example, https://*.courier.example:8443' } });
  });
  afterAll(async () => {
    await fx?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves the page with a strict CSP (no inline script), framed by no one by default, never cached', async () => {
    const res = await gw.http.get('/portal/');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/html/);
    expect(res.text).toContain('/portal/assets/index-abc123.js');
    expect(res.headers['cache-control']).toBe('no-cache');
    const csp = String(res.headers['content-security-policy']);
    const directives = Object.fromEntries(csp.split('; ').map((d) => [d.split(' ')[0], d.split(' ').slice(1).join(' ')]));
    expect(directives).toMatchObject({
      'default-src': "'none'",
      'script-src': "'self'",
      'style-src': "'self'",
      'connect-src': "'self'",
      'base-uri': "'none'",
      'frame-ancestors': "'none'",
    });
    expect(csp).not.toContain('unsafe-inline');
    expect(csp).not.toContain('unsafe-eval');
    expect(res.headers['x-frame-options']).toBe('DENY');
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.headers['referrer-policy']).toBe('no-referrer');
  });

  it('lets the origins of PORTAL_FRAME_ANCESTORS frame it, and refuses a setting that is not a list of origins', async () => {
    const res = await framed.http.get('/portal/');
    expect(String(res.headers['content-security-policy'])).toContain('frame-ancestors https://www.courier.example https://*.courier.example:8443');
    expect(res.headers['x-frame-options']).toBeUndefined();
    expect(() => loadGatewayConfig({ PORTAL_FRAME_ANCESTORS: "https://ok.example; script-src 'unsafe-inline'" })).toThrow(/PORTAL_FRAME_ANCESTORS/);
    expect(() => loadGatewayConfig({ PORTAL_BASE_URL: 'ftp://portal.example' })).toThrow(/PORTAL_BASE_URL/);
    expect(loadGatewayConfig({ PORTAL_BASE_URL: 'https://portal.example/some/path' }).portalBaseUrl).toBe('https://portal.example');
  });

  it('serves every path of the app as the page (its router draws it), and hashed assets for a year', async () => {
    for (const path of ['/portal/webhooks/8a6e0804-2bd0-4672-b79d-d97027f9071a', '/portal/entrar', '/portal/index.html']) {
      const res = await gw.http.get(path);
      expect({ path, status: res.status, type: res.headers['content-type'] }).toEqual({ path, status: 200, type: expect.stringMatching(/^text\/html/) });
    }
    const asset = await gw.http.get('/portal/assets/index-abc123.js');
    expect(asset.status).toBe(200);
    expect(asset.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(asset.headers['content-type']).toMatch(/javascript/);
    const icon = await gw.http.get('/portal/favicon.svg');
    expect(icon.status).toBe(200);
    expect(icon.headers['cache-control']).toBe('no-cache');
  });

  it('answers a missing asset 404 in the envelope (a script tag never gets the page), and /portal with a redirect to /portal/', async () => {
    const missing = await gw.http.get('/portal/assets/index-gone.js');
    expect(missing.status).toBe(404);
    expect(missing.body).toEqual({ success: false, error: { code: 'NOT_FOUND', message: expect.any(String) } });
    expect((await gw.http.get('/portal/assets/../../etc/passwd')).status).toBe(404);
    const bare = await gw.http.get('/portal');
    expect(bare.status).toBe(301);
    expect(bare.headers.location).toBe('/portal/');
    expect((await gw.http.post('/portal/').send({})).status).toBe(404);
  });

  it('says the portal is not built, in the envelope, when its build is missing', async () => {
    const empty = mkdtempSync(join(tmpdir(), 'svc-portal-empty-'));
    try {
      const bare = await fx.addGateway({ env: { PORTAL_ASSETS_DIR: empty } });
      const res = await bare.http.get('/portal/');
      expect(res.status).toBe(503);
      expect(res.body.error).toEqual({ code: 'SERVICE_UNAVAILABLE', message: expect.stringMatching(/not built/) });
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });
});
