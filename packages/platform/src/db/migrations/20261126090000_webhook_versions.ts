import { sql, type Kysely } from 'kysely';

/**
 * A per-company counter of changes to where and how its events are delivered (issue 16): every
 * insert of a webhook, and every update of a column that routes or signs, adds one in the same
 * transaction. Each event carries the counter as its own transaction read it, so the dispatcher can
 * route it from routes it keeps in memory, read at that count or later, instead of reading
 * `webhooks` for every event: any change committed before the event's transaction read the counter
 * is in those routes. A row lock on the counter orders concurrent changes, so the count only grows
 * in commit order. A trigger, so no writer of `webhooks` (today's or a later one) can forget it.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table webhook_versions (
      empresa_id uuid primary key references empresas (id) on delete cascade,
      version bigint not null
    )`.execute(db);
  await sql`
    insert into webhook_versions (empresa_id, version)
    select empresa_id, 1 from webhooks group by empresa_id`.execute(db);
  await sql`
    create function webhooks_bump_version() returns trigger language plpgsql as $$
    begin
      insert into webhook_versions as v (empresa_id, version) values (new.empresa_id, 1)
      on conflict (empresa_id) do update set version = v.version + 1;
      if tg_op = 'UPDATE' and old.empresa_id is distinct from new.empresa_id then
        insert into webhook_versions as v (empresa_id, version) values (old.empresa_id, 1)
        on conflict (empresa_id) do update set version = v.version + 1;
      end if;
      return null;
    end
    $$`.execute(db);
  // Only the columns that decide where an event goes and how it is signed: a description's edit
  // leaves the routes as they are. The list is WEBHOOK_VERSIONED_COLUMNS (db/tables/webhooks.table.ts),
  // held equal to it by packages/platform/test/webhook-versions.test.ts.
  await sql`
    create trigger webhooks_version_trg
    after insert or update of empresa_id, sucursal_id, modo, url, secret, secreto_anterior, secreto_anterior_expira_en, eventos, activo
    on webhooks for each row execute function webhooks_bump_version()`.execute(db);
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop trigger if exists webhooks_version_trg on webhooks`.execute(db);
  await sql`drop function if exists webhooks_bump_version()`.execute(db);
  await sql`drop table if exists webhook_versions`.execute(db);
}
