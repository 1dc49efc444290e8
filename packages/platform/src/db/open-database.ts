import type pg from 'pg';
import type { CommonSettings } from '../settings';
import { createDb, createPool, type Db, type PoolSettings } from './database';

/** Where `openDatabase` puts the pool's close: the `push` of a StopStack (lifecycle.ts). */
export interface UndoStack {
  push(name: string, step: () => Promise<unknown>): void;
}

/**
 * A service's Postgres: the pool (`DB_POOL_SIZE` connections, shown as `applicationName` in
 * pg_stat_activity; readiness checks query it; each with `DB_STATEMENT_TIMEOUT_MS` as its
 * `statement_timeout`), the kysely instance over it, and their close on `undo` as the step `db`.
 */
export function openDatabase(
  settings: Pick<CommonSettings, 'databaseUrl' | 'dbPoolSize' | 'dbStatementTimeoutMs'>,
  applicationName: string,
  undo: UndoStack,
  options: Pick<PoolSettings, 'genericPlans'> = {},
): { pool: pg.Pool; db: Db } {
  const pool = createPool({
    connectionString: settings.databaseUrl,
    max: settings.dbPoolSize,
    applicationName,
    statementTimeoutMs: settings.dbStatementTimeoutMs,
    ...options,
  });
  const db = createDb(pool);
  undo.push('db', () => db.destroy());
  return { pool, db };
}
