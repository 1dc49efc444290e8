import { sql, type Kysely } from 'kysely';

/**
 * Resending, secret rotation and the headers every delivery carries (docs/integrators.md): a resend shares
 * its original's event, so the one-delivery-per-(event, webhook) index now covers originals only; a
 * rotation keeps the replaced secret until its overlap ends; an event keeps its position in its
 * shipment's history and its mode, so retries, resends and the reconciler send the same headers.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    alter table webhooks
      add column secreto_anterior text,
      add column secreto_anterior_expira_en timestamptz,
      add column modo text not null default 'live' check (modo in ('live', 'test')),
      add constraint webhooks_secreto_anterior_ck check ((secreto_anterior is null) = (secreto_anterior_expira_en is null))
  `.execute(db);

  await sql`
    alter table outbox
      add column secuencia integer check (secuencia >= 1),
      add column modo text not null default 'live' check (modo in ('live', 'test'))
  `.execute(db);
  // Events written before: every entry of a live shipment's history wrote one event, and only live
  // shipments wrote any, so an event's rank among its shipment's events is its place in the history.
  await sql`
    update outbox o set secuencia = r.n
    from (select id, row_number() over (partition by data ->> 'numeroGuia' order by created_at, id) as n from outbox) r
    where r.id = o.id
  `.execute(db);

  await sql`alter table entregas add column es_reenvio boolean not null default false`.execute(db);
  await sql`update entregas set es_reenvio = true where reenvio_de is not null`.execute(db);
  await sql`drop index entregas_evento_webhook_uq`.execute(db);
  await sql`create unique index entregas_evento_webhook_uq on entregas (evento_id, webhook_id) where evento_id is not null and not es_reenvio`.execute(
    db,
  );
  // "Has it been resent?" (recovery), and the `on delete set null` of reenvio_de.
  await sql`create index entregas_reenvio_de_idx on entregas (reenvio_de) where reenvio_de is not null`.execute(db);
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index entregas_reenvio_de_idx`.execute(db);
  await sql`drop index entregas_evento_webhook_uq`.execute(db);
  // The older index admits one delivery per (event, webhook): resends cannot stay.
  await sql`delete from entregas where es_reenvio`.execute(db);
  await sql`create unique index entregas_evento_webhook_uq on entregas (evento_id, webhook_id) where evento_id is not null`.execute(db);
  await sql`alter table entregas drop column es_reenvio`.execute(db);
  await sql`alter table outbox drop column modo, drop column secuencia`.execute(db);
  await sql`
    alter table webhooks
      drop constraint webhooks_secreto_anterior_ck,
      drop column modo,
      drop column secreto_anterior_expira_en,
      drop column secreto_anterior
  `.execute(db);
}
