import pg from 'pg';

/** Creates the database named in `url` when it does not exist yet (a fresh machine's first start). */
export async function ensureDatabase(url: string, template?: string): Promise<void> {
  const target = new URL(url);
  const name = decodeURIComponent(target.pathname.replace(/^\//, ''));
  if (!name) throw new Error('DATABASE_URL names no database');
  const admin = new URL(url);
  admin.pathname = '/postgres';
  const client = new pg.Client({ connectionString: admin.toString() });
  await client.connect();
  try {
    const found = await client.query('select 1 from pg_database where datname = $1', [name]);
    if (found.rowCount === 0) {
      const ident = (s: string): string => `"${s.replace(/"/g, '""')}"`;
      try {
        await client.query(`create database ${ident(name)}${template ? ` template ${ident(template)}` : ''}`);
      } catch (err) {
        // Another process created it between our check and our create.
        if ((err as { code?: string }).code !== '42P04') throw err;
      }
    }
  } finally {
    await client.end();
  }
}
