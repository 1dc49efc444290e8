import {
  CompiledQuery,
  Kysely,
  PostgresAdapter,
  PostgresDriver,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type DatabaseConnection,
  type QueryResult,
  type Transaction as KyselyTransaction,
} from 'kysely';
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

const PREPARED = Symbol('prepared statement name');

/** A compiled statement that runs as the named prepared statement `name` on each connection. */
export type PreparedQuery<R> = CompiledQuery<R> & { readonly [PREPARED]: string };

/**
 * A statement to prepare once per connection: a pg client then sends only Bind and Execute for it,
 * sparing Postgres the parse and plan of every run. Worth it for a hot, fixed text: the creation
 * statement went from 699-724 to 841-884 creations/s (bench/README.md, "What the creation path
 * costs"). Run it with `db.executeQuery(preparedQuery(...))`, in or out of a transaction.
 */
export function preparedQuery<R>(name: string, text: string, parameters: readonly unknown[]): PreparedQuery<R> {
  return { ...CompiledQuery.raw(text, [...parameters]), [PREPARED]: name } as PreparedQuery<R>;
}

/** kysely's Postgres connection, but a `preparedQuery` runs as a named pg statement. */
class PgConnection implements DatabaseConnection {
  constructor(readonly client: pg.PoolClient) {}

  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    const name = (query as Partial<PreparedQuery<R>>)[PREPARED];
    const values = [...query.parameters];
    const result = name
      ? await this.client.query<R & pg.QueryResultRow>({ name, text: query.sql, values })
      : await this.client.query<R & pg.QueryResultRow>(query.sql, values);
    const changed = ['INSERT', 'UPDATE', 'DELETE', 'MERGE'].includes(result.command);
    return { rows: result.rows, numAffectedRows: changed ? BigInt(result.rowCount ?? 0) : undefined };
  }

  // eslint-disable-next-line require-yield -- nothing here streams; the interface asks for it
  async *streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new Error('streaming is not supported');
  }
}

/** kysely's Postgres driver for transactions and the rest; connections are `PgConnection`s. */
class PgDriver extends PostgresDriver {
  constructor(private readonly pool: pg.Pool) {
    super({ pool });
  }

  override async acquireConnection(): Promise<DatabaseConnection> {
    return new PgConnection(await this.pool.connect());
  }

  override async releaseConnection(connection: DatabaseConnection): Promise<void> {
    (connection as PgConnection).client.release();
  }
}

export function createDb(pool: pg.Pool): Kysely<Database> {
  return new Kysely<Database>({
    dialect: {
      createAdapter: () => new PostgresAdapter(),
      createDriver: () => new PgDriver(pool),
      createIntrospector: (db) => new PostgresIntrospector(db),
      createQueryCompiler: () => new PostgresQueryCompiler(),
    },
  });
}

export type Db = Kysely<Database>;
/** A transaction: what a function that takes row locks asks for, so a lock outside one does not type-check. */
export type Transaction = KyselyTransaction<Database>;
