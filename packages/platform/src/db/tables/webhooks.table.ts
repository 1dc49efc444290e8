import { sql, type RawBuilder, type Selectable } from 'kysely';
import { previousSecretOf, type Modo, type PreviousSecret, type Webhook, type WebhooksTable, type WebhookTipo } from '@svc/contracts';
import type { Db, Transaction } from '../database';
import type { SecretBox } from '../sealed-secrets';

/**
 * What both services must agree on about `webhooks`: the columns that decide where an event goes
 * and how it is sent and signed, the target they make, and the one writer of the table (the
 * gateway's operations, the passes that keep its secrets sealed). Reads stay with each service's
 * own repository.
 */

type WebhookColumn = keyof WebhooksTable;

/** The columns that decide which events reach a webhook: its company, branch, mode, subscription and state. */
export const WEBHOOK_ROUTING_COLUMNS = ['empresa_id', 'sucursal_id', 'modo', 'eventos', 'activo'] as const satisfies readonly WebhookColumn[];

/**
 * The columns that make a webhook's target: where its deliveries go, the secrets that sign them,
 * its company (the dispatcher shares its send slots between companies first), and whether it is a
 * listening session (sent through its stream, not over HTTPS).
 */
export const WEBHOOK_TARGET_COLUMNS = ['id', 'empresa_id', 'url', 'secret', 'secreto_anterior', 'secreto_anterior_expira_en', 'activo', 'modo', 'tipo'] as const satisfies readonly WebhookColumn[];

/**
 * Every column whose change alters a company's routes or targets: the column list of the
 * `webhook_versions` trigger, which a test holds equal to this. A new routing or signing column
 * goes in one of the lists above and, in its migration, into the trigger.
 */
export const WEBHOOK_VERSIONED_COLUMNS: readonly WebhookColumn[] = [...new Set<WebhookColumn>([...WEBHOOK_ROUTING_COLUMNS, ...WEBHOOK_TARGET_COLUMNS])].filter(
  (c) => c !== 'id' && c !== 'tipo', // a key, and a kind: never updated
);

/** A webhook's target columns, as read: its secrets sealed (db/sealed-secrets.ts). */
export type WebhookTargetRow = Pick<Selectable<WebhooksTable>, (typeof WEBHOOK_TARGET_COLUMNS)[number]>;

/** Where and how a webhook's deliveries are sent. */
export interface WebhookTarget {
  id: string;
  /** Its company: the tenant whose share of the send slots its deliveries use. */
  companyId: string;
  url: string;
  /** The signing key, opened: never log it. */
  secret: string;
  /**
   * The secret before the last rotation and the end of its overlap, during which it signs beside
   * `secret` (the sender compares the end with each attempt's time); null when there is none.
   */
  previousSecret: PreviousSecret | null;
  active: boolean;
  /** Its mode: only events of this mode reach it; a PING's `X-SVC-Modo`. */
  mode: Modo;
  /** `escucha`: a listening session, whose attempts go through its stream (`svc listen`). */
  kind: WebhookTipo;
}

/**
 * The target of a row, its secrets opened with `secrets`: throws SealedSecretError when one does not
 * open (a key SECRETS_KEY no longer lists, an altered value), so nothing is ever signed with a wrong
 * key. Opening costs a few microseconds; callers that hold targets (the dispatcher's routes) open
 * once per read, not once per delivery.
 */
export function webhookTargetOf(r: WebhookTargetRow, secrets: SecretBox): WebhookTarget {
  const previous = previousSecretOf(r);
  return {
    id: r.id,
    companyId: r.empresa_id,
    url: r.url,
    secret: secrets.open(r.id, r.secret),
    previousSecret: previous && { secret: secrets.open(r.id, previous.secret), expiresAt: previous.expiresAt },
    active: r.activo,
    mode: r.modo,
    kind: r.tipo,
  };
}

/**
 * The company's webhook count (`webhook_versions`, kept by a trigger on this table), for the
 * statement that writes an event: the event carries it, and the dispatcher routes the event from
 * routes it holds only if they were read at that count or later. 0 before any webhook.
 */
export function webhooksVersionOf(empresaId: RawBuilder<unknown>): RawBuilder<string> {
  return sql<string>`coalesce((select wv.version from webhook_versions wv where wv.empresa_id = ${empresaId}), 0)`;
}

// ---- the gateway's operations ----------------------------------------------------------------------

/** `id` chosen by the caller, who sealed `sealedSecret` for it (the id is the seal's associated data). */
export async function insertWebhook(
  trx: Transaction,
  w: { id: string; empresaId: string; sucursalId: string | null; modo: Modo; url: string; sealedSecret: string; eventos: string[]; descripcion: string | null },
): Promise<Webhook> {
  return trx
    .insertInto('webhooks')
    .values({
      id: w.id,
      empresa_id: w.empresaId,
      sucursal_id: w.sucursalId,
      modo: w.modo,
      url: w.url,
      secret: w.sealedSecret,
      eventos: w.eventos,
      descripcion: w.descripcion,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** `activo` among the fields: a reactivation's caller holds the company's lock and has counted the active ones. */
export async function updateWebhook(
  db: Db,
  empresaId: string,
  id: string,
  fields: { url?: string; eventos?: string[]; descripcion?: string | null; activo?: boolean },
): Promise<Webhook | undefined> {
  return db
    .updateTable('webhooks')
    .set({ ...fields, updated_at: sql<Date>`now()` })
    .where('id', '=', id)
    .where('empresa_id', '=', empresaId)
    .returningAll()
    .executeTakeFirst();
}

/**
 * Deactivates an active webhook; undefined when it was not active (or not the company's), so the
 * caller tells 409 from 404 with a second look. The history stays: nothing is deleted.
 */
export async function deactivateWebhook(db: Db, empresaId: string, id: string): Promise<Webhook | undefined> {
  return db
    .updateTable('webhooks')
    .set({ activo: false, updated_at: sql<Date>`now()` })
    .where('id', '=', id)
    .where('empresa_id', '=', empresaId)
    .where('activo', '=', true)
    .returningAll()
    .executeTakeFirst();
}

/**
 * Replaces the secret with `sealedSecret`, sealed for this webhook. With an overlap, the replaced
 * secret goes on signing beside the new one until `now() + overlapHours`; without one it stops at
 * once. Either way a previous secret still in its overlap is dropped: a new rotation ends the older
 * overlap. The replaced value moves as it is stored, sealed for the same row. Returns the webhook as
 * it now is.
 */
export async function rotateSecret(db: Db, empresaId: string, id: string, sealedSecret: string, overlapHours: number): Promise<Webhook | undefined> {
  const overlapping = overlapHours > 0;
  return db
    .updateTable('webhooks')
    .set({
      // The right-hand `secret` is the value before this update.
      secreto_anterior: overlapping ? sql<string>`secret` : null,
      secreto_anterior_expira_en: overlapping ? sql<Date>`now() + make_interval(hours => ${overlapHours})` : null,
      secret: sealedSecret,
      updated_at: sql<Date>`now()`,
    })
    .where('id', '=', id)
    .where('empresa_id', '=', empresaId)
    .returningAll()
    .executeTakeFirst();
}

// ---- listening sessions (svc listen) ----------------------------------------------------------------

/**
 * Opens a listening session: a hidden webhook of the company's test mode, routed as a test webhook
 * of `sucursalId`'s scope would be. `url` only describes it (the platform never sends there).
 */
export async function insertListenSession(
  trx: Transaction,
  s: { id: string; empresaId: string; sucursalId: string | null; url: string; sealedSecret: string; eventos: string[] },
): Promise<Webhook> {
  return trx
    .insertInto('webhooks')
    .values({
      id: s.id,
      empresa_id: s.empresaId,
      sucursal_id: s.sucursalId,
      modo: 'test',
      tipo: 'escucha',
      url: s.url,
      secret: s.sealedSecret,
      eventos: s.eventos,
      descripcion: null,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/**
 * Ends open sessions (`activo` false): no event routes to them from the next one on. Returns the
 * ids it closed (a session already closed is not among them).
 */
export async function closeListenSessions(db: Db, ids: readonly string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  const rows = await db
    .updateTable('webhooks')
    .set({ activo: false, updated_at: sql<Date>`now()` })
    .where('id', '=', sql<string>`any(${sql.val([...ids])}::uuid[])`)
    .where('tipo', '=', 'escucha')
    .where('activo', '=', true)
    .returning('id')
    .execute();
  return rows.map((r) => r.id);
}

// ---- the secrets at rest (db/secrets-at-rest.ts runs the passes) -------------------------------------

/** Rows read and written per statement: short statements, and a pass never holds many row versions at once. */
export const SEALING_BATCH = 500;

/** A row's secrets as a sealing pass read them (`old*`) and as it writes them back. */
export interface ResealedSecrets {
  id: string;
  oldSecret: string;
  oldPrevious: string | null;
  secret: string;
  previous: string | null;
}

/**
 * Writes re-sealed secrets, each row only if it is still as read (a rotation in between wins);
 * returns the ids written.
 */
export async function writeResealedSecrets(db: Db, updates: readonly ResealedSecrets[]): Promise<Set<string>> {
  const written = await sql<{ id: string }>`
    update webhooks w set secret = u.secret, secreto_anterior = u.previous
    from unnest(
      ${sql.val(updates.map((u) => u.id))}::uuid[],
      ${sql.val(updates.map((u) => u.oldSecret))}::text[],
      ${sql.val(updates.map((u) => u.oldPrevious))}::text[],
      ${sql.val(updates.map((u) => u.secret))}::text[],
      ${sql.val(updates.map((u) => u.previous))}::text[]
    ) as u(id, old_secret, old_previous, secret, previous)
    where w.id = u.id and w.secret = u.old_secret and w.secreto_anterior is not distinct from u.old_previous
    returning w.id`.execute(db);
  return new Set(written.rows.map((r) => r.id));
}

/**
 * Erases previous secrets whose overlap has ended (both columns null, as a rotation without overlap
 * leaves them), up to `batchSize` rows; returns how many. Readers already ignore an ended one
 * (the sender compares its end with each attempt's time): this is about not keeping it at rest.
 * Rows a rotation holds are skipped, for the next pass.
 */
export async function eraseEndedPreviousSecrets(db: Db, batchSize = SEALING_BATCH): Promise<number> {
  const result = await sql`
    with ended as (
      select id from webhooks
      where secreto_anterior_expira_en <= now()
      order by secreto_anterior_expira_en
      limit ${batchSize}
      for update skip locked
    )
    update webhooks w set secreto_anterior = null, secreto_anterior_expira_en = null
    from ended
    where w.id = ended.id and w.secreto_anterior_expira_en <= now()`.execute(db);
  return Number(result.numAffectedRows ?? 0n);
}
