import { sql, type Kysely } from 'kysely';

/**
 * The customer portal's ways in (docs/portal.md): single-use links issued by the internal route, and the
 * sessions they are traded for. Only SHA-256 hashes of the link's and the session's secrets are kept:
 * a copy of this table opens no portal. A link is used once (`usado_en`) and expires; a session ends
 * after 30 minutes idle or 8 hours (`expira_en`), on logout, or when the operator ends the company's
 * sessions (`terminada_en`).
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table portal_enlaces (
      id uuid primary key default gen_random_uuid(),
      empresa_id uuid not null references empresas (id) on delete cascade,
      usuario text not null,
      hash text not null unique,
      expira_en timestamptz not null,
      usado_en timestamptz,
      created_at timestamptz not null default now()
    )`.execute(db);
  await sql`create index portal_enlaces_empresa_idx on portal_enlaces (empresa_id, expira_en)`.execute(db);
  await sql`
    create table portal_sesiones (
      id uuid primary key default gen_random_uuid(),
      empresa_id uuid not null references empresas (id) on delete cascade,
      usuario text not null,
      hash text not null unique,
      created_at timestamptz not null,
      ultimo_uso_en timestamptz not null,
      expira_en timestamptz not null,
      terminada_en timestamptz
    )`.execute(db);
  await sql`create index portal_sesiones_empresa_idx on portal_sesiones (empresa_id, expira_en)`.execute(db);
}
