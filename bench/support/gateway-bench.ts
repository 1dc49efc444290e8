// What the gateway benchmarks share (bench/gateway, bench/capacity): the gateway as a child process,
// companies and tokens made through the internal routes, autocannon requests that rotate tokens,
// and the wait for a quiet machine.
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import type autocannon from 'autocannon';
import { cpuPercent, cpuSnapshot } from './cpu';

const ROOT = join(__dirname, '..', '..');

/** A child process (node --import tsx ... or any node args), its stdout shown only with BENCH_VERBOSE. */
export function startService(name: string, args: string[], env: Record<string, string>): ChildProcess {
  const child = spawn(process.execPath, args, { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout?.on('data', (b: Buffer) => {
    if (process.env.BENCH_VERBOSE) process.stdout.write(`[${name}] ${b.toString()}`);
  });
  child.stderr?.on('data', (b: Buffer) => process.stderr.write(`[${name}] ${b.toString()}`));
  return child;
}

/** Polls `url` until its status passes `ok` (30 s at most). */
export async function waitFor(url: string, ok: (status: number) => boolean): Promise<void> {
  const until = Date.now() + 30_000;
  for (;;) {
    try {
      if (ok((await fetch(url)).status)) return;
    } catch {}
    if (Date.now() > until) throw new Error(`${url} did not come up`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** A call to the gateway's internal routes (`/internal/v1`) at `base` (http://host:port) with the admin token. */
export async function admin<T>(base: string, adminToken: string, method: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(`${base}/internal/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = (await res.json()) as { data: T };
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
  return json.data;
}

/** A verified company with `fields`, and its live and test tokens (each its own rate-limit window). */
export async function company(base: string, adminToken: string, fields: Record<string, unknown>): Promise<{ id: string; live: string; test: string }> {
  const { id } = await admin<{ id: string }>(base, adminToken, 'POST', '/empresas', { nombre: 'Bench', verificada: true, ...fields });
  const { live, test } = await admin<{ live: string; test: string }>(base, adminToken, 'POST', `/empresas/${id}/tokens`);
  return { id, live, test };
}

/** Each request takes the next token in turn, so the load spreads over many tokens (or companies). */
export function rotating(tokens: string[], method: 'GET' | 'POST', path: string, body?: string): autocannon.Request[] {
  let i = 0;
  return [
    {
      method,
      path,
      body,
      setupRequest: (req) => ({
        ...req,
        headers: { ...req.headers, authorization: `Bearer ${tokens[i++ % tokens.length]!}`, 'content-type': 'application/json' },
      }),
    },
  ];
}

/**
 * Other work on this shared machine skews the figures: before each scenario, wait (up to
 * BENCH_QUIET_TIMEOUT seconds, default 180) until the machine's CPU use, ours idle, stays under
 * BENCH_QUIET_PERCENT (of one core, default 25) for two seconds.
 */
export async function waitForQuiet(): Promise<void> {
  const limit = Number(process.env.BENCH_QUIET_PERCENT ?? 25);
  const deadline = Date.now() + Number(process.env.BENCH_QUIET_TIMEOUT ?? 180) * 1000;
  for (;;) {
    const before = cpuSnapshot({});
    await new Promise((r) => setTimeout(r, 2000));
    const busy = cpuPercent(before, cpuSnapshot({}), 2).machine ?? 0;
    if (busy <= limit) return;
    if (Date.now() > deadline) {
      console.log(`  (machine still busy: ${busy}% of one core used by other work; measuring anyway)`);
      return;
    }
  }
}

/** The body of a single shipment creation (`POST /api/v1/guias`). */
export const SHIPMENT_BODY = JSON.stringify({
  destinatario: { nombre: 'Cliente Bench', telefono: '+502 5555 0000', direccion: '6a Avenida 10-20, Zona 1' },
  paquete: { peso: 2.5 },
  referencia: 'BENCH',
});
