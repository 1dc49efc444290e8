import { sql, type Kysely } from 'kysely';

/**
 * Webhook secrets sealed at rest (issue 28; docs/decisions/0006-secrets-sealed-at-rest.md). The
 * sealing itself needs SECRETS_KEY, which migrations do not read: every gateway and dispatcher seals
 * the rows still in plaintext (and re-seals those of an older key) as it starts, before it serves or
 * sends. This migration only gives those passes their indexes, both partial and so nearly empty:
 * the rows left to seal, which the gateway's upkeep looks for every minute, and the previous secrets
 * whose overlap it erases once ended.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await sql`create index webhooks_plaintext_idx on webhooks (id) where secret not like 'v1:%' or secreto_anterior not like 'v1:%'`.execute(db);
  await sql`create index webhooks_secreto_anterior_idx on webhooks (secreto_anterior_expira_en) where secreto_anterior_expira_en is not null`.execute(db);
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index if exists webhooks_secreto_anterior_idx`.execute(db);
  await sql`drop index if exists webhooks_plaintext_idx`.execute(db);
}
