import { AppError, type ActivityAction } from '@svc/contracts';
import { dropDaysEndedBefore, type Db, type Transaction } from '@svc/platform';

/** `usuario` of every action taken through the internal routes (portal.md, Actividad). */
export const OPERATOR = 'operador';
/** `usuario` of an action taken with an API token (`/api/v1`). */
export const API_USER = 'api';

/** What an action's parameters may be: plain values, never an object that could carry more. */
export type ActivityDetail = Record<string, string | number | boolean | null | readonly string[]>;

export interface ActivityEntry {
  empresaId: string;
  /** Who: OPERATOR, API_USER, or the portal link's `usuario` (1-200 characters). */
  usuario: string;
  accion: ActivityAction;
  /** The branch it was about (its tokens, its webhook, the shipment's branch). */
  sucursalId?: string | null;
  webhookId?: string | null;
  detalle?: ActivityDetail | null;
}

export interface ActivityRecord {
  id: string;
  usuario: string;
  accion: ActivityAction;
  sucursalId: string | null;
  webhookId: string | null;
  detalle: Record<string, unknown> | null;
  createdAt: Date;
}

export interface ActivityPage {
  items: ActivityRecord[];
  /** The `before` of the next (older) page; null on the last. */
  nextCursor: string | null;
}

/**
 * What a token (`svc_live_`/`svc_test_`) or a webhook secret (`whsec_`) looks like. The log is shown
 * to the company's staff and kept for RETENTION_DAYS: one that slipped into an entry would be a leak
 * with a long life, so an entry that holds one is refused outright (a bug, not a user's error).
 */
const SECRET_LIKE = /svc_(live|test)_|whsec_/;

function refuseSecrets(entry: ActivityEntry): void {
  const texts = [entry.usuario, ...Object.values(entry.detalle ?? {}).flatMap((v) => (typeof v === 'string' ? [v] : Array.isArray(v) ? v : []))];
  if (texts.some((t) => SECRET_LIKE.test(t))) throw new Error(`activity ${entry.accion}: an entry must never hold a token or a secret`);
}

/**
 * Appends one entry. Called with the transaction of the action it records, so the entry exists
 * exactly when the action does: a refused or rolled-back action leaves none.
 */
export async function recordActivity(db: Db | Transaction, entry: ActivityEntry): Promise<void> {
  refuseSecrets(entry);
  await db
    .insertInto('actividad')
    .values({
      empresa_id: entry.empresaId,
      usuario: entry.usuario,
      accion: entry.accion,
      sucursal_id: entry.sucursalId ?? null,
      webhook_id: entry.webhookId ?? null,
      detalle: entry.detalle ? JSON.stringify(entry.detalle) : null,
    })
    .execute();
}

/** The id text of an entry: digits only (a bigint). */
const CURSOR = /^[1-9]\d{0,18}$/;
/** Postgres's largest bigint: a longer cursor would fail the comparison in Postgres (a 500), not here. */
const MAX_BIGINT = 9_223_372_036_854_775_807n;

const isCursor = (text: string): boolean => CURSOR.test(text) && BigInt(text) <= MAX_BIGINT;

/**
 * A company's log, newest first, `limit` entries per page; `before` is the previous page's
 * `nextCursor` (400 VALIDATION_ERROR when it is not one). Served by `actividad_empresa_idx`.
 */
export async function listActivity(db: Db, empresaId: string, page: { limit: number; before?: string }): Promise<ActivityPage> {
  if (page.before !== undefined && !isCursor(page.before)) throw new AppError('VALIDATION_ERROR', 'cursor is not valid');
  let q = db
    .selectFrom('actividad')
    .select(['id', 'usuario', 'accion', 'sucursal_id', 'webhook_id', 'detalle', 'created_at'])
    .where('empresa_id', '=', empresaId);
  if (page.before !== undefined) q = q.where('id', '<', page.before);
  const rows = await q
    .orderBy('id', 'desc')
    .limit(page.limit + 1)
    .execute();
  const items = rows.slice(0, page.limit).map((r) => ({
    id: r.id,
    usuario: r.usuario,
    accion: r.accion,
    sucursalId: r.sucursal_id,
    webhookId: r.webhook_id,
    detalle: r.detalle,
    createdAt: r.created_at,
  }));
  return { items, nextCursor: rows.length > page.limit ? (items[items.length - 1]?.id ?? null) : null };
}

/**
 * Retention: drops the days of entries that ended more than `retentionDays` (RETENTION_DAYS) before
 * `now`, whole partitions (no entry is deleted: the append-only trigger refuses any delete). Returns
 * how many entries went.
 */
export function removeOldActivity(db: Db, retentionDays: number, now: Date): Promise<number> {
  return dropDaysEndedBefore(db, 'actividad', new Date(now.getTime() - retentionDays * 86_400_000));
}
