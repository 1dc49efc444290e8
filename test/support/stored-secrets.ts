import type pg from 'pg';

/**
 * What a backup or a read replica would give away: every row of every table of the database, as
 * text, that contains one of `needles` (a secret, or the `whsec_` every plaintext secret starts
 * with). Empty when none does.
 */
export async function rowsContaining(pool: Pick<pg.Pool, 'query'>, needles: readonly string[]): Promise<Array<{ table: string; row: string }>> {
  const tables = await pool.query<{ name: string }>(`select quote_ident(table_name) as name from information_schema.tables where table_schema = 'public' and table_type = 'BASE TABLE' order by 1`);
  const found: Array<{ table: string; row: string }> = [];
  for (const { name } of tables.rows) {
    const rows = await pool.query<{ row: string }>(`select t::text as row from ${name} t where t::text like any($1::text[])`, [
      needles.map((n) => `%${n.replace(/[\\%_]/g, (c) => `\\${c}`)}%`),
    ]);
    for (const r of rows.rows) found.push({ table: name, row: r.row });
  }
  return found;
}

/** The `webhooks` text columns of every row: `secret`, `secreto_anterior`, and the rest. */
export async function webhookTexts(pool: Pick<pg.Pool, 'query'>): Promise<string[]> {
  const columns = await pool.query<{ name: string }>(
    `select quote_ident(column_name) as name from information_schema.columns
     where table_schema = 'public' and table_name = 'webhooks' and data_type in ('text', 'character varying', 'ARRAY') order by ordinal_position`,
  );
  const rows = await pool.query<Record<string, string | string[] | null>>(`select ${columns.rows.map((c) => c.name).join(', ')} from webhooks`);
  return rows.rows.flatMap((r) => Object.values(r).flatMap((v) => (v === null ? [] : Array.isArray(v) ? v : [v])));
}
