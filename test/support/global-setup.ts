import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { createDb, createPool, migrateToLatest } from '@svc/platform';
import { adminUrl, TEMPLATE_ENV, TEST_DATABASE_BASE } from './env';

/**
 * Migrates one template database per migration set (its name carries their hash), so every test
 * file can clone it in milliseconds. Concurrent runs serialise on an advisory lock.
 */
export default async function globalSetup(): Promise<void> {
  const dir = join(__dirname, '../../packages/platform/src/db/migrations');
  const hash = createHash('sha256');
  for (const f of readdirSync(dir).sort()) hash.update(f).update(readFileSync(join(dir, f)));
  const template = `svc_test_tpl_${hash.digest('hex').slice(0, 12)}`;
  process.env[TEMPLATE_ENV] = template;

  const admin = new pg.Client({ connectionString: adminUrl() });
  await admin.connect();
  try {
    await admin.query('select pg_advisory_lock(424242)');
    const found = await admin.query('select 1 from pg_database where datname = $1', [template]);
    if (found.rowCount === 0) {
      const building = `${template}_build`;
      await admin.query(`drop database if exists "${building}"`);
      await admin.query(`create database "${building}"`);
      const pool = createPool({ connectionString: `${TEST_DATABASE_BASE}/${building}`, max: 1 });
      const db = createDb(pool);
      try {
        await migrateToLatest(db);
      } finally {
        await db.destroy();
      }
      await admin.query(`alter database "${building}" rename to "${template}"`);
    }
  } finally {
    await admin.query('select pg_advisory_unlock(424242)').catch(() => undefined);
    await admin.end();
  }
}
