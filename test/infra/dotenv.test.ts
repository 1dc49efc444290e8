import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { dropPrefix, uniquePrefix } from '../support/redis-prefix';
import { TEST_REDIS_URL } from '../support/env';
import { startReceiver, TEST_CERT_DIR, type Receiver } from '../support/https-receiver';

/**
 * The operator's contract: settings come from the environment, and a `.env` file at the root is read when present;
 * NODE_EXTRA_CA_CERTS is one of the settings. Node applies that variable only when the process
 * starts, so a value from `.env` has to reach the sender another way; here a gateway whose every
 * setting comes from `.env` (none from the environment) PINGs an HTTPS receiver signed by the test CA.
 */

const ROOT = join(__dirname, '../..');
const SETTINGS = [
  'DATABASE_URL',
  'REDIS_URL',
  'REDIS_PREFIX',
  'PORT',
  'GATEWAY_METRICS_PORT',
  'ADMIN_TOKEN',
  'DISPATCH_HOST_MAP',
  'DISPATCH_ALLOW_CIDRS',
  'NODE_EXTRA_CA_CERTS',
];

describe('settings from .env, NODE_EXTRA_CA_CERTS included', () => {
  let database: TestDatabase;
  let prefix: string;
  let receiver: Receiver;
  let dir: string;
  let child: ChildProcess | undefined;
  let output = '';

  beforeAll(async () => {
    database = await createTestDatabase();
    prefix = uniquePrefix('dotenv');
    receiver = await startReceiver();
    dir = mkdtempSync(join(tmpdir(), 'svc-dotenv-'));
  });
  afterAll(async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((r) => child!.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    }
    await receiver?.close();
    await dropPrefix(prefix);
    await database?.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a gateway configured only by .env trusts the CA it names for the PING', async () => {
    const admin = 'dotenv-admin-token';
    writeFileSync(
      join(dir, '.env'),
      [
        `DATABASE_URL=${database.url}`,
        `REDIS_URL=${TEST_REDIS_URL}`,
        `REDIS_PREFIX=${prefix}`,
        'PORT=0',
        'GATEWAY_METRICS_PORT=0',
        `ADMIN_TOKEN=${admin}`,
        'DISPATCH_HOST_MAP=receiver.test=127.0.0.1',
        'DISPATCH_ALLOW_CIDRS=127.0.0.0/8',
        `NODE_EXTRA_CA_CERTS=${join(TEST_CERT_DIR, 'ca.pem')}`,
        '',
      ].join('\n'),
    );
    const env: Record<string, string | undefined> = { ...process.env };
    for (const name of SETTINGS) delete env[name];
    // The working directory is where a `.env` is looked for first (then the workspace root).
    child = spawn(process.execPath, ['--import', pathToFileURL(require.resolve('tsx')).href, join(ROOT, 'services/gateway/src/main.ts')], {
      cwd: dir,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.on('data', (b: Buffer) => (output += b.toString('utf8')));
    child.stderr!.on('data', (b: Buffer) => (output += b.toString('utf8')));

    const end = Date.now() + 20_000;
    let port: number | undefined;
    while (port === undefined) {
      const m = /"port":(\d+),"metricsPort":\d+,"msg":"gateway listening"/.exec(output);
      if (m) port = Number(m[1]);
      else if (child.exitCode !== null || Date.now() > end) throw new Error(`gateway did not start:\n${output}`);
      else await new Promise((r) => setTimeout(r, 50));
    }

    const call = async (method: string, path: string, token: string, body?: unknown) => {
      const res = await fetch(`http://127.0.0.1:${port}${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as { data: Record<string, unknown> } };
    };
    const empresa = await call('POST', '/internal/v1/empresas', admin, { nombre: 'Dotenv', verificada: true });
    expect(empresa.status).toBe(201);
    const tokens = await call('POST', `/internal/v1/empresas/${String(empresa.body.data.id)}/tokens`, admin);
    const live = String(tokens.body.data.live);
    const webhook = await call('POST', '/api/v1/webhooks', live, { url: receiver.url('/hook') });
    expect(webhook.status).toBe(201);

    const ping = await call('POST', `/api/v1/webhooks/${String(webhook.body.data.id)}/test`, live);
    expect(ping.status).toBe(200);
    expect(ping.body.data).toMatchObject({ exitoso: true, statusCode: 200 });
    expect(receiver.requests.map((r) => r.headers['x-svc-event'])).toEqual(['PING']);
  }, 40_000);
});
