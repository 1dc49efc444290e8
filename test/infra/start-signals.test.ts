import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { serviceStartEnv } from '../support/service-start-env';

/**
 * The operator's contract: `pnpm start` and `pnpm --filter <service> start` stop gracefully on SIGINT or
 * SIGTERM. A supervisor (docker, systemd, a test harness, `timeout`) signals the one process it
 * started, pnpm, not the whole process group; pnpm passes the signal to its script's shell only, so
 * every shell in between must `exec` its command, or the services never hear the signal and keep
 * running as orphans.
 */

const ROOT = join(__dirname, '../..');

interface Run {
  /** stdout and stderr so far. */
  output: () => string;
  /** Resolves once every process that held stdout has exited (orphans included), with pnpm's exit code. */
  closed: Promise<number | null>;
  signal: (s: NodeJS.Signals) => void;
}

function run(args: string[], env: Record<string, string>): Run {
  const child = spawn('pnpm', args, { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let text = '';
  child.stdout!.on('data', (b: Buffer) => (text += b.toString('utf8')));
  child.stderr!.on('data', (b: Buffer) => (text += b.toString('utf8')));
  // 'close' waits for the pipes, which an orphaned service would keep open.
  const closed = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  return { output: () => text, closed, signal: (s) => child.kill(s) };
}

async function waitForOutput(r: Run, needles: string[], ms = 25_000): Promise<void> {
  const end = Date.now() + ms;
  while (!needles.every((n) => r.output().includes(n))) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${needles.join(', ')}:\n${r.output()}`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<T>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

describe('start scripts pass SIGTERM and SIGINT on to the services', () => {
  const started = serviceStartEnv('start');


  it.each([
    ['gateway', 'gateway listening', 'SIGTERM'],
    ['dispatcher', 'dispatcher started', 'SIGINT'],
  ] as const)('pnpm --filter %s start: %s reaches the service, which stops gracefully', async (service, ready, signal) => {
    const r = run(['--filter', service, 'start'], started.env());
    await waitForOutput(r, [ready]);
    r.signal(signal);
    const code = await within(r.closed, 15_000, `${service} still running after ${signal} to pnpm`);
    expect(r.output()).toContain(`"signal":"${signal}"`);
    expect(code).toBe(0);
  }, 45_000);

  it('pnpm start: SIGTERM to pnpm stops both services gracefully', async () => {
    const r = run(['start'], started.env());
    await waitForOutput(r, ['gateway listening', 'dispatcher started'], 35_000);
    r.signal('SIGTERM');
    await within(r.closed, 15_000, 'services still running after SIGTERM to pnpm start');
    const stopping = r.output().split('\n').filter((l) => l.includes('"signal":"SIGTERM"'));
    expect(stopping.some((l) => l.includes('"service":"gateway"'))).toBe(true);
    expect(stopping.some((l) => l.includes('"service":"dispatcher"'))).toBe(true);
  }, 60_000);
});
