import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TEST_DATABASE_BASE, TEST_REDIS_URL } from '../support/env';

const TEST_DATABASE_URL = `${TEST_DATABASE_BASE}/postgres`;

/**
 * `pnpm start`'s first step, scripts/preflight.mjs: its advice fits the settings it was given. A
 * server set elsewhere that does not answer is named by its setting and address (never its
 * password), without suggesting `pnpm services`, which starts only the local defaults.
 */

const SCRIPT = join(__dirname, '../../scripts/preflight.mjs');

/** A port nothing listens on: taken from the system, then given back. */
async function deadPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

/** Runs the preflight in an empty directory (no .env) with exactly these settings. */
function preflight(env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  const cwd = mkdtempSync(join(tmpdir(), 'preflight-'));
  const { DATABASE_URL: _d, REDIS_URL: _r, REDIS_CLUSTER_NODES: _c, ...rest } = process.env;
  const child = spawn(process.execPath, [SCRIPT], { cwd, env: { ...rest, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (b: Buffer) => (output += b.toString('utf8')));
  child.stderr!.on('data', (b: Buffer) => (output += b.toString('utf8')));
  return new Promise((resolve) =>
    child.once('close', (code) => {
      rmSync(cwd, { recursive: true, force: true });
      resolve({ code, output });
    }),
  );
}

describe('scripts/preflight.mjs', () => {
  it('says nothing and lets the start go on when both answer', async () => {
    expect(await preflight({ DATABASE_URL: TEST_DATABASE_URL, REDIS_URL: TEST_REDIS_URL })).toEqual({ code: 0, output: '' });
  });

  it('names a REDIS_URL that does not answer, without its password and without `pnpm services`', async () => {
    const port = await deadPort();
    const { code, output } = await preflight({ DATABASE_URL: TEST_DATABASE_URL, REDIS_URL: `redis://:hunter2@127.0.0.1:${port}` });
    expect(code).toBe(1);
    expect(output).toContain(`nothing answers for Redis at 127.0.0.1:${port} (REDIS_URL=redis://127.0.0.1:${port})`);
    expect(output).toContain('set REDIS_URL');
    expect(output).not.toContain('PostgreSQL');
    expect(output).not.toContain('hunter2');
    expect(output).not.toContain('pnpm services');
  });

  it('names a DATABASE_URL that does not answer, and one that is not a URL', async () => {
    const port = await deadPort();
    const dead = await preflight({ DATABASE_URL: `postgres://postgres@127.0.0.1:${port}/svc`, REDIS_URL: TEST_REDIS_URL });
    expect(dead.code).toBe(1);
    expect(dead.output).toContain(`nothing answers for PostgreSQL at 127.0.0.1:${port} (DATABASE_URL=postgres://127.0.0.1:${port}/svc)`);
    expect(dead.output).not.toContain('pnpm services');
    const bad = await preflight({ DATABASE_URL: 'not a url', REDIS_URL: TEST_REDIS_URL });
    expect(bad.code).toBe(1);
    expect(bad.output).toContain('DATABASE_URL is not a URL');
  });

  it('asks a Redis Cluster for any of its nodes', async () => {
    const [a, b] = [await deadPort(), await deadPort()];
    const { code, output } = await preflight({ DATABASE_URL: TEST_DATABASE_URL, REDIS_CLUSTER_NODES: `127.0.0.1:${a},127.0.0.1:${b}` });
    expect(code).toBe(1);
    expect(output).toContain(`nothing answers for Redis Cluster at any of 127.0.0.1:${a},127.0.0.1:${b} (REDIS_CLUSTER_NODES)`);
    expect(output).not.toContain('pnpm services');
  });
});
