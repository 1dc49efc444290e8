import pg from 'pg';
import { adminUrl } from '../support/env';
import { dropPrefix } from '../support/redis-prefix';
import { stackInfo } from './stack';

/** Stops the stack (SIGINT to its process group, as Ctrl-C would), then drops its database and keys. */
export default async function globalTeardown(): Promise<void> {
  const info = stackInfo();
  const alive = (): boolean => {
    try {
      process.kill(-info.pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  if (alive()) {
    process.kill(-info.pid, 'SIGINT');
    const until = Date.now() + 15_000;
    while (alive() && Date.now() < until) await new Promise((r) => setTimeout(r, 200));
    if (alive()) process.kill(-info.pid, 'SIGKILL');
  }
  await dropPrefix(info.redisPrefix);
  const c = new pg.Client({ connectionString: adminUrl() });
  await c.connect();
  try {
    await c.query(`drop database if exists "${info.database}" with (force)`);
  } finally {
    await c.end();
  }
}
