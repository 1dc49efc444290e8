import { sql, type RawBuilder, type Selectable } from 'kysely';
import {
  NOTICE_EVENTS,
  previousSecretOf,
  type AutoDisableReason,
  type DeactivatedBy,
  type Modo,
  type PreviousSecret,
  type Webhook,
  type WebhooksTable,
  type WebhookTipo,
} from '@svc/contracts';
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

/** An event as the routing rule sees it: SQL expressions of its company, mode, branch, name and (for a notice) the webhook it is about. */
export interface RoutedEventSql {
  empresaId: RawBuilder<unknown>;
  modo: RawBuilder<unknown>;
  sucursalId: RawBuilder<unknown>;
  evento: RawBuilder<unknown>;
  /** The webhook a notice is about (null for a shipment event): it never receives its own notice. */
  about: RawBuilder<unknown>;
}

const NOTICES_SQL = sql`array[${sql.join(NOTICE_EVENTS.map((e) => sql.lit(e)))}]::text[]`;

/**
 * The one routing rule, whether the webhook `w` (a table alias) would receive the event, whatever its
 * `activo`: the dispatcher's fan-out adds `activo`, the replay of what an inactive webhook missed
 * does not. An event reaches webhooks of its own company and mode; a company event those with no
 * branch, a branch event those and the branch's own (`sucursal_id = null` never matches). An empty
 * `eventos` takes every shipment event but no notice: a notice goes only to webhooks that list it,
 * never to the webhook it is about, and never to a listening session (`tipo = 'escucha'`): notices are
 * about the company's webhooks and go to its webhooks, and a session is none.
 */
export function routesEvent(w: string, ev: RoutedEventSql): RawBuilder<boolean> {
  const col = (c: string) => sql.ref(`${w}.${c}`);
  return sql<boolean>`(${col('empresa_id')} = ${ev.empresaId}
    and ${col('modo')} = ${ev.modo}
    and (${col('sucursal_id')} is null or ${col('sucursal_id')} = ${ev.sucursalId})
    and (${ev.evento} = any(${col('eventos')}) or (cardinality(${col('eventos')}) = 0 and not (${ev.evento} = any(${NOTICES_SQL}))))
    and ${col('id')} is distinct from ${ev.about}
    and (${col('tipo')} = 'webhook' or not (${ev.evento} = any(${NOTICES_SQL}))))`;
}

// ---- the dispatcher's health of endpoints (extensions.md, Endpoint health) ---------------------------

/** One delivery ended (not a PING): to its webhook's health. */
export interface EndedDelivery {
  webhookId: string;
  ok: boolean;
  /** When its last attempt ended. */
  at: Date;
}

/**
 * A success rewrites a healthy webhook's last success at most this often: a busy healthy webhook's
 * row is written about once a second, not once per delivery (`ultimoExito` lags by at most this).
 */
export const LAST_SUCCESS_RESOLUTION_MS = 1000;

/** A webhook's health as a batch of ended deliveries left it, for the ones that had a failure in it. */
export interface FailingWebhook {
  id: string;
  empresaId: string;
  sucursalId: string | null;
  modo: Modo;
  url: string;
  descripcion: string | null;
  activo: boolean;
  fallas: number;
  fallandoDesde: Date | null;
  avisoEn: Date | null;
  /** Postgres's clock as the statement ran: the windows are measured on it. */
  now: Date;
}

interface WebhookOutcomes {
  id: string;
  /** The batch's latest success. */
  okAt: Date | null;
  /** Failures that ended after it (all of them when none succeeded), the first and the last. */
  fails: number;
  firstFail: Date | null;
  lastFail: Date | null;
}

function outcomesPerWebhook(ended: readonly EndedDelivery[]): WebhookOutcomes[] {
  const byId = new Map<string, { okAt: number | null; failures: number[] }>();
  for (const e of ended) {
    let w = byId.get(e.webhookId);
    if (!w) byId.set(e.webhookId, (w = { okAt: null, failures: [] }));
    if (e.ok) w.okAt = Math.max(w.okAt ?? -Infinity, e.at.getTime());
    else w.failures.push(e.at.getTime());
  }
  return [...byId].map(([id, w]) => {
    const after = w.okAt === null ? w.failures : w.failures.filter((t) => t > (w.okAt ?? 0));
    const date = (t: number | null) => (t === null ? null : new Date(t));
    return {
      id,
      okAt: date(w.okAt),
      fails: after.length,
      firstFail: date(after.length > 0 ? Math.min(...after) : null),
      lastFail: date(w.failures.length > 0 ? Math.max(...w.failures) : null),
    };
  });
}

/**
 * Adds a batch of ended deliveries to their webhooks' health in one statement, one row write per
 * webhook at most: a success after the last failure recorded ends the run of failures (one that
 * ended before it, arriving late, does not), failures add to the run, and its start is the first
 * failure's end. A healthy webhook's row is left unwritten unless its last success is older than
 * LAST_SUCCESS_RESOLUTION_MS. Returns the webhooks that had a failure in the batch, as they now
 * stand: the caller decides on notices and deactivation.
 */
export async function recordHealth(db: Db, ended: readonly EndedDelivery[]): Promise<FailingWebhook[]> {
  const rows = outcomesPerWebhook(ended);
  if (rows.length === 0) return [];
  const iso = (d: Date | null) => d?.toISOString() ?? null;
  // Whether the batch's success ends the run: it ended after every failure recorded so far.
  const resets = sql`(v.ok_at is not null and v.ok_at >= coalesce(w.salud_ultima_falla, '-infinity'::timestamptz))`;
  const result = await sql<{
    id: string;
    empresa_id: string;
    sucursal_id: string | null;
    modo: Modo;
    url: string;
    descripcion: string | null;
    activo: boolean;
    salud_fallas: number;
    salud_fallando_desde: Date | null;
    salud_aviso_en: Date | null;
    ahora: Date;
  }>`
    with v as (
      select * from unnest(
        ${sql.val(rows.map((r) => r.id))}::uuid[],
        ${sql.val(rows.map((r) => iso(r.okAt)))}::timestamptz[],
        ${sql.val(rows.map((r) => r.fails))}::int[],
        ${sql.val(rows.map((r) => iso(r.firstFail)))}::timestamptz[],
        ${sql.val(rows.map((r) => iso(r.lastFail)))}::timestamptz[]
      ) as v(id, ok_at, fallas, primera, ultima)
    ), changed as (
      update webhooks w set
        salud_fallas = case when ${resets} then v.fallas else w.salud_fallas + v.fallas end,
        salud_fallando_desde = case when ${resets} then v.primera else coalesce(w.salud_fallando_desde, v.primera) end,
        salud_estable_desde = case when ${resets} and (w.salud_fallas > 0 or w.salud_estable_desde is null) then v.ok_at else w.salud_estable_desde end,
        salud_ultimo_exito = greatest(w.salud_ultimo_exito, v.ok_at),
        salud_ultima_falla = greatest(w.salud_ultima_falla, v.ultima)
      from v
      -- A listening session is never judged by the health rules: its failures are a laptop's receiver's.
      where w.id = v.id and w.tipo = 'webhook' and (
        v.fallas > 0 or w.salud_fallas > 0 or w.salud_estable_desde is null or w.salud_ultimo_exito is null
        or w.salud_ultimo_exito < v.ok_at - make_interval(secs => ${LAST_SUCCESS_RESOLUTION_MS / 1000})
      )
      returning w.id, w.empresa_id, w.sucursal_id, w.modo, w.url, w.descripcion, w.activo, w.salud_fallas, w.salud_fallando_desde, w.salud_aviso_en, v.fallas
    )
    select id, empresa_id, sucursal_id, modo, url, descripcion, activo, salud_fallas, salud_fallando_desde, salud_aviso_en, now() as ahora
    from changed where fallas > 0`.execute(db);
  return result.rows.map((r) => ({
    id: r.id,
    empresaId: r.empresa_id,
    sucursalId: r.sucursal_id,
    modo: r.modo,
    url: r.url,
    descripcion: r.descripcion,
    activo: r.activo,
    fallas: r.salud_fallas,
    fallandoDesde: r.salud_fallando_desde,
    avisoEn: r.salud_aviso_en,
    now: r.ahora,
  }));
}

/** When a webhook that keeps failing is deactivated (WEBHOOK_DISABLE_AFTER_HOURS, WEBHOOK_DISABLE_MIN_FAILURES). */
export interface DisableRule {
  afterMs: number;
  minFailures: number;
}

/**
 * Takes the turn to send a webhook's WEBHOOK_FALLANDO: at most one per `everyMs` (24 hours), claimed
 * by the one statement that moves `salud_aviso_en`, so two dispatchers never both send it. True when
 * this caller took it; only while the webhook is active and still failing as the rule counts.
 */
export async function claimFailingNotice(trx: Transaction, id: string, minFailures: number, everyMs: number): Promise<boolean> {
  const row = await trx
    .updateTable('webhooks')
    .set({ salud_aviso_en: sql<Date>`now()` })
    .where('id', '=', id)
    .where('tipo', '=', 'webhook')
    .where('activo', '=', true)
    .where('salud_fallas', '>=', minFailures)
    .where((eb) => eb.or([eb('salud_aviso_en', 'is', null), eb('salud_aviso_en', '<=', sql<Date>`now() - make_interval(secs => ${everyMs / 1000})`)]))
    .returning('id')
    .executeTakeFirst();
  return row !== undefined;
}

/**
 * The platform's deactivation, exactly as DELETE's (only `activo` and `updated_at` change what the
 * pipeline sees), recording `sistema` and why. For FALLAS_CONTINUAS the rule is checked again on the
 * row as it is now, so a success committed meanwhile wins. Undefined when it did not apply (already
 * inactive, or recovered).
 */
export async function autoDeactivateWebhook(trx: Transaction, id: string, motivo: AutoDisableReason, rule: DisableRule): Promise<Webhook | undefined> {
  let q = trx
    .updateTable('webhooks')
    .set({ activo: false, updated_at: sql<Date>`now()`, desactivado_en: sql<Date>`now()`, desactivado_por: 'sistema', desactivado_motivo: motivo })
    .where('id', '=', id)
    .where('tipo', '=', 'webhook')
    .where('activo', '=', true);
  if (motivo === 'FALLAS_CONTINUAS') {
    q = q.where('salud_fallas', '>=', rule.minFailures).where('salud_fallando_desde', '<=', sql<Date>`now() - make_interval(secs => ${rule.afterMs / 1000})`);
  }
  return q.returningAll().executeTakeFirst();
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

/**
 * `activo` among the fields: a reactivation's caller holds the company's lock and has counted the
 * active ones. A deactivation records when and `por` (who) unless the webhook already was inactive;
 * a reactivation starts its health afresh (no run of failures: an old run would deactivate it
 * again at its first failure).
 */
export async function updateWebhook(
  db: Db,
  empresaId: string,
  id: string,
  fields: { url?: string; eventos?: string[]; descripcion?: string | null; activo?: boolean },
  por: Exclude<DeactivatedBy, 'sistema'> = 'empresa',
): Promise<Webhook | undefined> {
  // The right-hand `activo` is the value before this update.
  const state =
    fields.activo === false
      ? {
          desactivado_en: sql<Date>`case when activo then now() else desactivado_en end`,
          desactivado_por: sql<DeactivatedBy>`case when activo then ${por} else desactivado_por end`,
          desactivado_motivo: sql<AutoDisableReason | null>`case when activo then null else desactivado_motivo end`,
        }
      : fields.activo === true
        ? {
            salud_fallas: sql<number>`case when activo then salud_fallas else 0 end`,
            salud_fallando_desde: sql<Date | null>`case when activo then salud_fallando_desde else null end`,
            salud_estable_desde: sql<Date | null>`case when activo then salud_estable_desde else now() end`,
          }
        : {};
  return db
    .updateTable('webhooks')
    .set({ ...fields, ...state, updated_at: sql<Date>`now()` })
    .where('id', '=', id)
    .where('empresa_id', '=', empresaId)
    .returningAll()
    .executeTakeFirst();
}

/**
 * Deactivates an active webhook; undefined when it was not active (or not the company's), so the
 * caller tells 409 from 404 with a second look. The history stays: nothing is deleted.
 */
export async function deactivateWebhook(db: Db, empresaId: string, id: string, por: Exclude<DeactivatedBy, 'sistema'> = 'empresa'): Promise<Webhook | undefined> {
  return db
    .updateTable('webhooks')
    .set({ activo: false, updated_at: sql<Date>`now()`, desactivado_en: sql<Date>`now()`, desactivado_por: por, desactivado_motivo: null })
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
