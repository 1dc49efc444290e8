import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { adminUrl, TEMPLATE_ENV, TEST_DATABASE_BASE } from './env';

export interface TestDatabase {
  url: string;
  name: string;
  drop(): Promise<void>;
}

/** A fresh database for one test file, cloned from the migrated template. */
export async function createTestDatabase(): Promise<TestDatabase> {
  const template = process.env[TEMPLATE_ENV];
  if (!template) throw new Error(`${TEMPLATE_ENV} is unset: run the tests through jest's globalSetup`);
  const name = `svc_t_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl() });
  await admin.connect();
  try {
    // Cloning needs the template free of sessions; a concurrent clone may hold it for a moment.
    for (let attempt = 0; ; attempt++) {
      try {
        await admin.query(`create database "${name}" template "${template}"`);
        break;
      } catch (err) {
        if (attempt > 50 || !/being accessed by other users/.test((err as Error).message)) throw err;
        await new Promise((r) => setTimeout(r, 50 + Math.random() * 100));
      }
    }
  } finally {
    await admin.end();
  }
  return {
    name,
    url: `${TEST_DATABASE_BASE}/${name}`,
    async drop() {
      const c = new pg.Client({ connectionString: adminUrl() });
      await c.connect();
      try {
        await c.query(`drop database if exists "${name}" with (force)`);
      } finally {
        await c.end();
      }
    },
  };
}

/**
 * A small pool on a test database for the test's own checks. As the services' pools do, an idle
 * connection that loses its server (the database dropped with force at teardown) is not an
 * unhandled 'error'; the next query reports it.
 */
export function testPool(url: string): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  pool.on('error', () => undefined);
  return pool;
}
