import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server } from 'node:http';
import { join } from 'node:path';
import { freePort } from '../support/free-port';

/**
 * The README's quick start, pasted against the wrong BASE (nothing listening, or another web server):
 * every helper of scripts/quick-start.sh gives up in one line that says where it looked, and the
 * whole block ends, rather than printing JSON parse stack traces or waiting for a receiver forever.
 * The happy path is the e2e suites' (test/e2e), which run the same receiver against a real stack.
 */

const ROOT = join(__dirname, '../..');
const README = readFileSync(join(ROOT, 'README.md'), 'utf8');

/** The quick start's terminal 2 block: the one that sources the helpers. */
function terminalTwo(): string {
  const section = README.split('\n## Quick start')[1]?.split('\n## ')[0] ?? '';
  const blocks = [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
  const block = blocks.find((b) => b.includes('. scripts/quick-start.sh'));
  if (block === undefined) throw new Error('no quick start block sources scripts/quick-start.sh');
  return block;
}

/**
 * Runs the block in bash at the root with BASE and the receivers' ports replaced; resolves with what
 * it printed. The bound is the helpers' own (20 s per receiver, 30 s per delivery) with room for a
 * loaded machine: past it, something waited without one.
 */
async function paste(base: string, ms = 180_000): Promise<{ code: number | null; output: string }> {
  const [live, test] = [await freePort(), await freePort()];
  const script = terminalTwo()
    .replace('BASE=http://localhost:3000', `BASE=${base}`)
    .replaceAll('8443', String(live))
    .replaceAll('8444', String(test));
  const child = spawn('bash', ['-c', script], { cwd: ROOT, env: { ...process.env, WEBHOOK_SECRET: '' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (b: Buffer) => (output += b.toString('utf8')));
  child.stderr.on('data', (b: Buffer) => (output += b.toString('utf8')));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the quick start still ran after ${ms} ms against ${base}:\n${output}`));
    }, ms);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

function expectLoudOneLiners(output: string, base: string): void {
  expect(output).toContain(`no answer from ${base}: is terminal 1 up on that port?`);
  expect(output).toMatch(/the receiver for port \d+ stopped \(its reason is above\)/);
  expect(output).not.toContain('SyntaxError');
  expect(output).not.toMatch(/^\s+at /m);
  expect(output).not.toContain('undefined');
}

describe('the quick start against the wrong BASE', () => {
  it('README sources the helpers, and they parse in bash', async () => {
    expect(terminalTwo()).toContain('BASE=http://localhost:3000');
    const check = spawn('bash', ['-n', join(ROOT, 'scripts/quick-start.sh')]);
    expect(await new Promise((resolve) => check.once('close', resolve))).toBe(0);
  });

  it('nothing listening: one line per helper, and it ends', async () => {
    const base = `http://127.0.0.1:${await freePort()}`;
    expectLoudOneLiners((await paste(base)).output, base);
  }, 200_000);

  it('another web server on that port: the same', async () => {
    const other: Server = createHttpServer((_req, res) => res.writeHead(404, { 'Content-Type': 'text/html' }).end('<html>not here</html>'));
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', () => resolve()));
    const address = other.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    const base = `http://127.0.0.1:${address.port}`;
    try {
      expectLoudOneLiners((await paste(base)).output, base);
    } finally {
      await new Promise<void>((resolve) => other.close(() => resolve()));
    }
  }, 200_000);
});
