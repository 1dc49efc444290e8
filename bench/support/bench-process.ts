// What the benchmarks do around the services they measure: a fresh database, the build they run,
// child processes stopped cleanly, peak memory, and the end of a run (its receiver, queues and Redis keys).
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { execFileSync, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import pg from 'pg';
import { createDb, createPool, migrateToLatest } from '@svc/platform';
import { deletePrefix } from '../../test/support/redis-prefix';

/** Drops and recreates `name` on the server of `pgBase` (no trailing slash), migrated; its URL. */
export async function freshDatabase(pgBase: string, name: string): Promise<string> {
  const admin = new pg.Client({ connectionString: `${pgBase}/postgres` });
  await admin.connect();
  try {
    await admin.query(`drop database if exists "${name}" with (force)`);
    await admin.query(`create database "${name}"`);
  } finally {
    await admin.end();
  }
  const url = `${pgBase}/${name}`;
  const db = createDb(createPool({ connectionString: url, max: 1 }));
  try {
    await migrateToLatest(db);
  } finally {
    await db.destroy();
  }
  return url;
}

/** SIGTERM (the services' graceful stop), SIGKILL if it has not exited after `graceMs`. */
export async function stopChild(child: ChildProcess, graceMs = 15_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  await new Promise<void>((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
    setTimeout(() => child.kill('SIGKILL'), graceMs).unref();
  });
}

/** The process's peak resident memory so far (`VmHWM`), in MB. */
export function peakRssMb(pid: number): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Math.round(Number(m[1]) / 1024) : NaN;
}

/**
 * Starts a new peak for `peakRssMb`: the kernel's high-water mark of resident memory is reset to
 * what the process holds now (`/proc/<pid>/clear_refs`, value 5), so each phase reads its own peak.
 * False when the kernel refused (then the peak is the process's since it started).
 */
export function resetPeakRss(pid: number): boolean {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

/** Which build of the services a bench runs: `dist` (compiled by `pnpm build`, as `pnpm start:prod`) or `src` (through tsx, as `pnpm start`). */
export type ServiceBuild = 'dist' | 'src';

/**
 * BENCH_BUILD (`dist` unless set to `src`). For `dist`, runs `pnpm build` first (about 25 s) so the
 * figures are those of the tree as it is, unless BENCH_SKIP_BUILD=1 and both services have a build.
 */
export function prepareBuild(root: string): ServiceBuild {
  const build: ServiceBuild = process.env.BENCH_BUILD === 'src' ? 'src' : 'dist';
  if (build === 'src') return build;
  const built = ['gateway', 'dispatcher'].every((s) => existsSync(join(root, 'services', s, 'dist', 'main.js')));
  if (process.env.BENCH_SKIP_BUILD === '1' && built) return build;
  const started = Date.now();
  execFileSync('pnpm', ['build'], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
  console.log(`  pnpm build: ${((Date.now() - started) / 1000).toFixed(0)} s`);
  return build;
}

/** The node arguments that run `service`'s entry point in `build` (node arguments of the caller's first). */
export const serviceArgs = (service: 'gateway' | 'dispatcher', build: ServiceBuild, nodeArgs: string[] = []): string[] =>
  build === 'dist'
    ? [...prodNodeFlags(service), ...nodeArgs, `services/${service}/dist/main.js`]
    : [...nodeArgs, '--import', 'tsx', `services/${service}/src/main.ts`];

/** The node flags `pnpm start:prod` runs the service with (its heap's bounds), read from package.json: the bench runs what operators run. */
export function prodNodeFlags(service: 'gateway' | 'dispatcher'): string[] {
  const pkg = JSON.parse(readFileSync(join(__dirname, '..', '..', 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  const m = new RegExp(`exec node ((?:--\\S+ )*)services/${service}/dist/main\\.js`).exec(pkg.scripts['start:prod'] ?? '');
  if (!m) throw new Error(`package.json's start:prod does not run services/${service}/dist/main.js`);
  return m[1]!.split(' ').filter(Boolean);
}

/**
 * The end every dispatcher run shares: the receiver told to exit and waited for, the run's queues
 * closed, its Redis keys deleted and the client let go.
 */
export async function endRun(run: { receiver: ChildProcess; queues: Array<{ close(): Promise<void> }>; redis: Redis; prefix: string }): Promise<void> {
  run.receiver.send({ cmd: 'exit' });
  await stopChild(run.receiver);
  for (const queue of run.queues) await queue.close();
  await deletePrefix(run.redis, run.prefix);
  run.redis.disconnect();
}
