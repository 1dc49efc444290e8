import { sql, type Kysely } from 'kysely';

/**
 * Endpoint health and automatic deactivation (issue 39): a few columns on `webhooks`, kept by the
 * dispatcher as its deliveries end (one batched statement, see tables/webhooks.table.ts), so the
 * health of a webhook is read from its row, never from a scan of its delivery log; and who
 * deactivated it last, when and why. None of them routes or signs, so the `webhook_versions` trigger
 * (an `update of` list) does not fire for them. Existing inactive webhooks get `desactivado_en` from
 * their last change; who did it is not known (null).
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    alter table webhooks
      add column salud_fallas integer not null default 0 check (salud_fallas >= 0),
      add column salud_fallando_desde timestamptz,
      add column salud_ultimo_exito timestamptz,
      add column salud_ultima_falla timestamptz,
      add column salud_estable_desde timestamptz,
      add column salud_aviso_en timestamptz,
      add column desactivado_en timestamptz,
      add column desactivado_por text check (desactivado_por in ('sistema', 'empresa', 'operador')),
      add column desactivado_motivo text check (desactivado_motivo in ('FALLAS_CONTINUAS', 'GONE'))`.execute(db);
  await sql`update webhooks set desactivado_en = updated_at where not activo`.execute(db);
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await sql`
    alter table webhooks
      drop column salud_fallas, drop column salud_fallando_desde, drop column salud_ultimo_exito,
      drop column salud_ultima_falla, drop column salud_estable_desde, drop column salud_aviso_en,
      drop column desactivado_en, drop column desactivado_por, drop column desactivado_motivo`.execute(db);
}
