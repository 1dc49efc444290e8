import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { verify } from '@svc/webhook-signature';
import { createCompany, type Company } from '../../../test/support/test-gateway';
import { startDispatcherFixture, type DispatcherFixture } from '../../../test/support/test-dispatcher';

/**
 * packages/client/examples/create-webhook-and-shipment.ts run as its header says, against a started
 * gateway and dispatcher, with a sandbox token: it registers a webhook and creates a shipment through
 * the generated client, and the webhook then receives the shipment's GUIA_CREADA signed with the
 * secret the example wrote to SECRET_FILE (never to its output).
 */

const ROOT = join(__dirname, '../../..');
const EXAMPLE = 'packages/client/examples/create-webhook-and-shipment.ts';
const run = promisify(execFile);

let fx: DispatcherFixture;
let company: Company;

beforeAll(async () => {
  const loopback = { DISPATCH_HOST_MAP: 'receiver.test=127.0.0.1', DISPATCH_ALLOW_CIDRS: '127.0.0.0/8' };
  fx = await startDispatcherFixture('client-example', { gateway: { env: loopback }, dispatcher: { env: loopback } });
  company = await createCompany(fx.gw, { planActivo: true, creditos: 10 });
}, 60_000);
afterAll(() => fx?.stop());

it('type-checks strictly as an integrator\'s file', () => {
  const tsc = join(ROOT, 'node_modules/typescript/bin/tsc');
  expect(() => execFileSync(process.execPath, [tsc, '-p', join(ROOT, 'packages/client/examples/tsconfig.json')], { stdio: 'pipe' })).not.toThrow();
}, 60_000);

it('creates a webhook and a shipment; the webhook receives GUIA_CREADA signed with the stored secret', async () => {
  const secretFile = join(mkdtempSync(join(tmpdir(), 'svc-client-example-')), 'secret.txt');
  const { stdout } = await run(process.execPath, ['--import', 'tsx', EXAMPLE], {
    cwd: ROOT,
    env: { ...process.env, SVC_API: `http://127.0.0.1:${fx.gw.port}`, SVC_TOKEN: company.test, WEBHOOK_URL: fx.receiver.url('/client-example'), SECRET_FILE: secretFile },
  });
  const webhook = /^webhook (\S+) created$/m.exec(stdout);
  const secret = readFileSync(secretFile, 'utf8').trim();
  expect({ secret: /^whsec_\S+$/.test(secret), printed: stdout.includes(secret), mode: statSync(secretFile).mode & 0o777 }).toEqual({ secret: true, printed: false, mode: 0o600 });
  const shipment = /^shipment (SVC\w+) estado=CREADA$/m.exec(stdout);
  expect({ webhook: webhook !== null, shipment: shipment !== null }).toEqual({ webhook: true, shipment: true });
  expect(stdout).toMatch(new RegExp(`^tracking ${shipment![1]!} historial=GUIA_CREADA$`, 'm'));

  const [delivery] = await fx.receiver.waitFor(1, 15_000, '/client-example');
  const body = JSON.parse(delivery!.rawBody.toString('utf8')) as { event: string; data: { numeroGuia: string } };
  expect(body).toMatchObject({ event: 'GUIA_CREADA', data: { numeroGuia: shipment![1]!, estado: 'CREADA' } });
  expect(delivery!.headers['x-svc-modo']).toBe('test');
  expect(verify(delivery!.rawBody, String(delivery!.headers['x-svc-signature']), secret)).toBe(true);
}, 60_000);

it('says what to set, and exits 2, without a token', async () => {
  const failed = await run(process.execPath, ['--import', 'tsx', EXAMPLE], { cwd: ROOT, env: { ...process.env, SVC_TOKEN: '', WEBHOOK_URL: '' } }).catch((err: { code: number; stderr: string }) => err);
  expect(failed).toMatchObject({ code: 2, stderr: expect.stringContaining('set SVC_TOKEN') });
});
