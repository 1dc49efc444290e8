import { sql, type Kysely } from 'kysely';

/**
 * The activity log (docs/portal.md, Actividad): who did what to a company's integration, and when: the
 * operator's internal routes ("operador"), the portal's users, the API ("api"). Append-only: a
 * trigger refuses every UPDATE, DELETE and TRUNCATE, except the DELETE of the retention pass
 * (RETENTION_DAYS), which says so in its own transaction (`svc.actividad_retention = on`). That is a
 * guard against a code path that would rewrite history, not against someone holding the database's
 * own credentials.
 *
 * `sucursal_id` and `webhook_id` name what the action was about and carry no foreign key: an entry
 * outlives what it names. `detalle` holds the action's parameters, never a token or a secret.
 * `(empresa_id, id desc)` serves the portal's page, newest first; `(created_at)` the retention's
 * walk.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table actividad (
      id bigint generated always as identity primary key,
      empresa_id uuid not null references empresas (id),
      usuario text not null check (char_length(usuario) between 1 and 200),
      accion text not null,
      sucursal_id uuid,
      webhook_id uuid,
      detalle jsonb,
      created_at timestamptz not null default now()
    )`.execute(db);
  await sql`create index actividad_empresa_idx on actividad (empresa_id, id desc)`.execute(db);
  await sql`create index actividad_created_idx on actividad (created_at)`.execute(db);
  await sql`
    create function actividad_append_only() returns trigger language plpgsql as $$
    begin
      if tg_op = 'DELETE' and current_setting('svc.actividad_retention', true) = 'on' then
        return old;
      end if;
      raise exception 'actividad is append-only: % refused', tg_op using errcode = 'raise_exception';
    end
    $$`.execute(db);
  await sql`
    create trigger actividad_append_only_trg
    before update or delete on actividad for each row execute function actividad_append_only()`.execute(db);
  await sql`
    create trigger actividad_no_truncate_trg
    before truncate on actividad for each statement execute function actividad_append_only()`.execute(db);
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table if exists actividad`.execute(db);
  await sql`drop function if exists actividad_append_only()`.execute(db);
}
