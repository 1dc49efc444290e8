// What both benchmarks do around the services they measure: a fresh database, child processes
// stopped cleanly, peak memory. (The run's Redis keys go with test/support/redis-prefix's deletePrefix.)
import { readFileSync } from 'node:fs';
import type { ChildProcess } from 'node:child_process';
import pg from 'pg';
import { createDb, createPool, migrateToLatest } from '@svc/schema';

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
