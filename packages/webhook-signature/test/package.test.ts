import { execFileSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sign, standardSignatureHeader } from '@svc/webhook-signature';

/**
 * The package as it would be published: `pnpm pack` (which builds it with tsc through `prepack`),
 * the tarball unpacked into a fresh node_modules, and plain `node` (no tsx) importing the compiled
 * JavaScript, as ESM and as CommonJS, to verify a delivery signed here. Its declarations are
 * type-checked from a consumer's file too.
 */

const ROOT = join(__dirname, '../../..');
const PACKAGE_DIR = join(__dirname, '..');
let dir: string;
let installed: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'svc-webhook-signature-pack-'));
  const env = { ...process.env, NODE_OPTIONS: '' };
  execFileSync('pnpm', ['pack', '--pack-destination', dir], { cwd: PACKAGE_DIR, env, stdio: 'pipe' });
  const tarball = readdirSync(dir).find((f) => f.endsWith('.tgz'));
  if (tarball === undefined) throw new Error(`pnpm pack wrote no tarball in ${dir}`);
  installed = join(dir, 'node_modules/@svc/webhook-signature');
  mkdirSync(installed, { recursive: true });
  execFileSync('tar', ['xzf', join(dir, tarball), '-C', installed, '--strip-components=1']);
}, 120_000);

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

it('packs the compiled JavaScript, its declarations, the README and a package.json that points at them', () => {
  const files = readdirSync(join(installed, 'dist')).sort();
  expect(files).toEqual(expect.arrayContaining(['index.js', 'index.d.ts', 'verify-delivery.js', 'verify-delivery.d.ts']));
  // LICENSE: pnpm packs the workspace root's (MIT) for a package that declares a license and has no file of its own.
  expect(readdirSync(installed).sort()).toEqual(['LICENSE', 'README.md', 'dist', 'package.json']);
  const manifest = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as Record<string, unknown>;
  expect(manifest).toMatchObject({
    name: '@svc/webhook-signature',
    version: expect.stringMatching(/^\d+\.\d+\.\d+$/),
    main: 'dist/index.js',
    types: 'dist/index.d.ts',
    exports: { '.': { types: './dist/index.d.ts', default: './dist/index.js' } },
    files: ['dist'],
  });
  expect(manifest).not.toHaveProperty('dependencies');
});

describe('plain node imports the packed package and verifies a delivery', () => {
  const secret = `whsec_${randomBytes(32).toString('base64')}`;
  const id = randomUUID();
  const now = new Date();
  const seconds = Math.floor(now.getTime() / 1000);
  const rawBody = JSON.stringify({ event: 'GUIA_CREADA', timestamp: now.toISOString(), webhookId: randomUUID(), data: { numeroGuia: 'GT-1' } });
  const headers = {
    'x-svc-signature': sign(rawBody, secret),
    'webhook-id': id,
    'webhook-timestamp': String(seconds),
    'webhook-signature': standardSignatureHeader(id, seconds, rawBody, [secret]),
  };
  const input = JSON.stringify({ rawBody, headers, secret });
  const run = (file: string, source: string): unknown => {
    writeFileSync(join(dir, file), source);
    const out = execFileSync(process.execPath, [join(dir, file)], { cwd: dir, input, env: { ...process.env, NODE_OPTIONS: '' } });
    return JSON.parse(out.toString('utf8'));
  };
  const consumer = `
    const { rawBody, headers, secret } = JSON.parse(require('node:fs').readFileSync(0, 'utf8'));
    const svcOnly = { 'x-svc-signature': headers['x-svc-signature'] };
    const { 'x-svc-signature': _, ...standardOnly } = headers;
    const results = [
      verifyDelivery({ rawBody, headers: svcOnly, secrets: secret }),
      verifyDelivery({ rawBody, headers: standardOnly, secrets: [secret] }),
      verifyDelivery({ rawBody: rawBody + ' ', headers, secrets: secret }),
      verifyDelivery({ rawBody, headers, secrets: secret, now: Date.now() + 10 * 60 * 1000 }),
      verify(rawBody, headers['x-svc-signature'], secret),
    ];
    process.stdout.write(JSON.stringify({ results, resolved: resolved() }));
  `;
  const expected = (resolvedTo: string) => ({
    results: [
      { ok: true, scheme: 'svc', event: 'GUIA_CREADA', payload: JSON.parse(rawBody), secretIndex: 0, signedAt: now.toISOString() },
      { ok: true, scheme: 'standard', event: 'GUIA_CREADA', payload: JSON.parse(rawBody), secretIndex: 0, signedAt: new Date(seconds * 1000).toISOString() },
      { ok: false, reason: 'invalid_signature' },
      { ok: false, reason: 'timestamp_out_of_tolerance' },
      true,
    ],
    resolved: resolvedTo,
  });

  it('as an ES module', () => {
    const source = `import { verifyDelivery, verify } from '@svc/webhook-signature';
      import { createRequire } from 'node:module';
      const require = createRequire(import.meta.url);
      const resolved = () => import.meta.resolve('@svc/webhook-signature');
      ${consumer}`;
    expect(run('consumer.mjs', source)).toEqual(expected(`file://${join(installed, 'dist/index.js')}`));
  });

  it('as CommonJS', () => {
    const source = `const { verifyDelivery, verify } = require('@svc/webhook-signature');
      const resolved = () => require.resolve('@svc/webhook-signature');
      ${consumer}`;
    expect(run('consumer.cjs', source)).toEqual(expected(join(installed, 'dist/index.js')));
  });
});

it("its declarations type-check a consumer's TypeScript (strict, NodeNext)", () => {
  writeFileSync(
    join(dir, 'consumer.ts'),
    `import { verifyDelivery, type VerifyDeliveryResult } from '@svc/webhook-signature';
     const result: VerifyDeliveryResult = verifyDelivery({ rawBody: '{}', headers: {}, secrets: ['a', 'b'], toleranceSeconds: 60 });
     export const reason: string = result.ok ? result.scheme + result.event + result.payload.webhookId : result.reason;
     // @ts-expect-error: secrets are strings
     verifyDelivery({ rawBody: '{}', headers: {}, secrets: 1 });
    `,
  );
  const tsc = join(ROOT, 'node_modules/typescript/bin/tsc');
  const args = ['--noEmit', '--strict', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--target', 'es2022'];
  args.push('--types', 'node', '--typeRoots', join(ROOT, 'node_modules/@types'), join(dir, 'consumer.ts'));
  expect(() => execFileSync(process.execPath, [tsc, ...args], { cwd: dir, stdio: 'pipe' })).not.toThrow();
}, 60_000);
