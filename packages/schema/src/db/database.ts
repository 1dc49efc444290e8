import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import type { Database } from './types';

// Postgres `date` stays a 'YYYY-MM-DD' string: a Guatemala calendar day must not drift through a JS Date.
pg.types.setTypeParser(pg.types.builtins.DATE, (v: string) => v);

export interface PoolSettings {
  connectionString: string;
  max?: number;
  applicationName?: string;
}

export function createPool(settings: PoolSettings): pg.Pool {
  const pool = new pg.Pool({
    connectionString: settings.connectionString,
    max: settings.max ?? 20,
    application_name: settings.applicationName,
    connectionTimeoutMillis: 3000,
  });
  // An idle client that loses its server must not crash the process; the next query reports it.
  pool.on('error', () => undefined);
  // A checked-out client (query or transaction in flight) that loses its server fails its query
  // and also emits 'error', which the pool only listens for while the client is idle: unheard,
  // that event is an uncaught exception and kills the process.
  pool.on('connect', (client) => client.on('error', () => undefined));
  return pool;
}

export function createDb(pool: pg.Pool): Kysely<Database> {
  return new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
}

export type Db = Kysely<Database>;
