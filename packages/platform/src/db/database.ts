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
import type { Database } from '@svc/contracts';

// Postgres `date` stays a 'YYYY-MM-DD' string: a Guatemala calendar day must not drift through a JS Date.
pg.types.setTypeParser(pg.types.builtins.DATE, (v: string) => v);

export interface PoolSettings {
  connectionString: string;
  max?: number;
  applicationName?: string;
  /**
   * Named prepared statements (`prepared`) keep one generic plan per connection instead of being
   * planned again at each run. Postgres's default (plan_cache_mode auto) kept custom plans for the
   * fan-out statement: 2.4 ms of planning for 0.6 ms of execution, every batch. Unnamed
   * statements are planned at each run whatever this says.
   */
  genericPlans?: boolean;
  /**
   * Postgres's `statement_timeout` on every connection, in ms (0: none, e.g. for migrations, which
   * may rewrite a whole table). Unset: the server's own (Postgres's default is none).
   */
  statementTimeoutMs?: number;
}

/** The `-c name=value` startup options of a pool's connections: settings applied as each connects. */
function connectionOptions(settings: PoolSettings): string | undefined {
  const options: string[] = [];
  if (settings.statementTimeoutMs !== undefined) options.push(`-c statement_timeout=${Math.trunc(settings.statementTimeoutMs)}`);
  if (settings.genericPlans) options.push('-c plan_cache_mode=force_generic_plan');
  return options.length > 0 ? options.join(' ') : undefined;
}

export function createPool(settings: PoolSettings): pg.Pool {
  const pool = new pg.Pool({
    connectionString: settings.connectionString,
    max: settings.max ?? 20,
    application_name: settings.applicationName,
    connectionTimeoutMillis: 3000,
    options: connectionOptions(settings),
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
 * sparing Postgres the parse and plan of every run. Worth it for a hot, fixed text such as the
 * creation statement (docs/decisions/0001-creation-in-one-prepared-statement.md has the figures).
 * Run it with `db.executeQuery(preparedQuery(...))`, in or out of a transaction.
 */
export function preparedQuery<R>(name: string, text: string, parameters: readonly unknown[]): PreparedQuery<R> {
  return { ...CompiledQuery.raw(text, [...parameters]), [PREPARED]: name } as PreparedQuery<R>;
}

const preparedTexts = new Map<string, string>();

/**
 * A kysely query (a `sql` template, a builder) compiled as the prepared statement `name`. Its text
 * must not change from run to run (arrays as parameters, not lists): a second text under one name
 * is a programming error, thrown here rather than by Postgres on some connection later.
 */
export function prepared<R>(name: string, query: { compile(db: Db): CompiledQuery<R> }, db: Db): PreparedQuery<R> {
  const compiled = query.compile(db);
  const known = preparedTexts.get(name);
  if (known === undefined) preparedTexts.set(name, compiled.sql);
  else if (known !== compiled.sql) throw new Error(`prepared statement ${name}: its text changed`);
  return preparedQuery<R>(name, compiled.sql, compiled.parameters);
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
