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

/** A statement whose text begins with `/*prepared:NAME*\/` runs as the named prepared statement NAME. */
const PREPARED = '/*prepared:';

function preparedName(text: string): string | undefined {
  if (!text.startsWith(PREPARED)) return undefined;
  const end = text.indexOf('*/', PREPARED.length);
  return end > PREPARED.length ? text.slice(PREPARED.length, end) : undefined;
}

/**
 * kysely runs `client.query(text, values)`, so Postgres parses and plans every statement again.
 * A hot statement opts in to being prepared once per connection by starting with
 * `/*prepared:NAME*\/`: a pg client then sends only Bind and Execute for it.
 */
function preparingPool(pool: pg.Pool) {
  const wrapped = new WeakMap<pg.PoolClient, { query: pg.PoolClient['query']; release: () => void }>();
  const wrap = (client: pg.PoolClient) => {
    let w = wrapped.get(client);
    if (!w) {
      const query = ((text: unknown, values?: unknown) => {
        const name = typeof text === 'string' ? preparedName(text) : undefined;
        return name
          ? client.query({ name, text: text as string, values: values as unknown[] })
          : client.query(text as string, values as unknown[]);
      }) as pg.PoolClient['query'];
      w = { query, release: () => client.release() };
      wrapped.set(client, w);
    }
    return w;
  };
  return { connect: async () => wrap(await pool.connect()), end: () => pool.end() };
}

export function createDb(pool: pg.Pool): Kysely<Database> {
  return new Kysely<Database>({ dialect: new PostgresDialect({ pool: preparingPool(pool) }) });
}

export type Db = Kysely<Database>;
