// `pnpm migrate`: applies pending migrations to DATABASE_URL, creating the database if it is missing.
import { createDb, createPool } from './database';
import { ensureDatabase } from './ensure-database';
import { migrateToLatest } from './migrate';
import { loadDotEnv } from '../settings';

async function main(): Promise<void> {
  loadDotEnv();
  const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/svc';
  await ensureDatabase(url);
  // No statement_timeout (DB_STATEMENT_TIMEOUT_MS is the services'): a migration may rewrite or
  // index a whole table, which takes as long as the table is large.
  const pool = createPool({ connectionString: url, max: 1, statementTimeoutMs: 0 });
  const db = createDb(pool);
  try {
    const applied = await migrateToLatest(db);
    console.log(applied.length ? `migrations applied: ${applied.join(', ')}` : 'migrations: up to date');
  } finally {
    await db.destroy();
  }
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
