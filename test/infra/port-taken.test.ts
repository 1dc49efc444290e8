import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { serviceStartEnv } from '../support/service-start-env';

/**
 * A newcomer running beside another stack meets a taken port first. Each listener's failure names
 * the variable that chose its port and the service, on one line and without a stack trace, so the
 * fix is in the message.
 */

const ROOT = join(__dirname, '../..');

/** Holds a port the way another stack would: every address, dual stack. */
async function holdPort(): Promise<{ port: number; server: Server }> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return { port: address.port, server };
}

/** Starts a service's entry as its start script does; resolves with its exit code and output. */
function runToExit(entry: string, env: Record<string, string>, ms = 30_000): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', entry], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (b: Buffer) => (output += b.toString('utf8')));
  child.stderr!.on('data', (b: Buffer) => (output += b.toString('utf8')));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${entry} still running after ${ms} ms with its port taken:\n${output}`));
    }, ms);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

describe('a taken port names the variable to change', () => {
  const started = serviceStartEnv('port-taken');

  it.each([
    // The metrics ports listen on METRICS_HOST (127.0.0.1 unless set), which the message names.
    ['dispatcher', 'DISPATCHER_METRICS_PORT', 'services/dispatcher/src/main.ts', {}, ' on 127.0.0.1'],
    ['gateway', 'GATEWAY_METRICS_PORT', 'services/gateway/src/main.ts', {}, ' on 127.0.0.1'],
    ['gateway', 'PORT', 'services/gateway/src/main.ts', {}, ''],
    ['gateway', 'ADMIN_PORT', 'services/gateway/src/main.ts', { ADMIN_HOST: '127.0.0.1' }, ' on 127.0.0.1'],
  ] as const)('%s with %s taken exits 1 saying so', async (service, variable, entry, extra, where) => {
    const held = await holdPort();
    try {
      const { code, output } = await runToExit(entry, { ...started.env(), ...extra, [variable]: String(held.port) });
      expect(code).toBe(1);
      expect(output).toContain(`${service} failed to start: port ${held.port}${where} is taken: set ${variable} (${service}) to a free port\n`);
      expect(output).not.toContain('EADDRINUSE');
      expect(output).not.toMatch(/^\s+at /m);
    } finally {
      await new Promise<void>((resolve) => held.server.close(() => resolve()));
    }
  });
});
