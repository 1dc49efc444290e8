import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import request from 'supertest';
import { Registry } from '@svc/observability';
import { closeServer, createMetricsServer, listen, loadSettings, METRICS_TIMEOUTS } from '@svc/platform';
import { startGatewayFixture, type GatewayFixture } from '../../../test/support/test-gateway';

/** How long the server takes to close a socket that sends half a request line and then nothing. */
function heldFor(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const start = Date.now();
    const socket = connect(port, '127.0.0.1', () => socket.write('GET /metrics HTTP/1.1\r\nHost: x\r\n'));
    socket.on('error', reject);
    socket.on('close', () => resolve(Date.now() - start));
    socket.resume();
  });
}

describe('the metrics port', () => {
  let fx: GatewayFixture;

  beforeAll(async () => {
    fx = await startGatewayFixture('metrics-port');
  });
  afterAll(() => fx?.stop());

  it('listens on loopback by default, or on METRICS_HOST', async () => {
    expect((fx.gw.metricsServer.address() as AddressInfo).address).toBe('127.0.0.1');
    const everywhere = await fx.addGateway({ env: { METRICS_HOST: '0.0.0.0' } });
    expect((everywhere.metricsServer.address() as AddressInfo).address).toBe('0.0.0.0');
    expect((await request(`http://127.0.0.1:${everywhere.metricsPort}`).get('/healthz')).status).toBe(200);
    expect(() => loadSettings('x', { METRICS_HOST: 'every-interface' }, () => ({}))).toThrow(/METRICS_HOST: must be an IP address/);
  });

  it('drops a client that never finishes its headers within the headers timeout, not Node\'s minute', async () => {
    const server = fx.gw.metricsServer;
    expect([server.headersTimeout, server.requestTimeout, server.keepAliveTimeout]).toEqual([METRICS_TIMEOUTS.headersMs, METRICS_TIMEOUTS.requestMs, METRICS_TIMEOUTS.keepAliveMs]);
    const ms = await heldFor(fx.gw.metricsPort);
    expect(ms).toBeGreaterThanOrEqual(METRICS_TIMEOUTS.headersMs - 100);
    expect(ms).toBeLessThan(METRICS_TIMEOUTS.headersMs + 2 * METRICS_TIMEOUTS.checkIntervalMs + 1000);
  }, 20_000);
});

describe('/readyz', () => {
  it('probes once for every hit within its max age, then again', async () => {
    let probes = 0;
    const server = createMetricsServer(new Registry(), [{ name: 'postgres', check: async () => void probes++ }], 2000, 300);
    const port = await listen(server, 0, '127.0.0.1');
    try {
      const agent = request(`http://127.0.0.1:${port}`);
      const answers = await Promise.all(Array.from({ length: 20 }, () => agent.get('/readyz')));
      expect(answers.map((r) => r.status)).toEqual(Array(20).fill(200));
      expect((await agent.get('/readyz')).body).toEqual({ status: 'ready', checks: { postgres: 'up' } });
      expect(probes).toBe(1);
      await new Promise((r) => setTimeout(r, 350));
      expect((await agent.get('/readyz')).status).toBe(200);
      expect(probes).toBe(2);
    } finally {
      await closeServer(server);
    }
  });
});
