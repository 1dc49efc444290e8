import { sql, type RawBuilder } from 'kysely';
import type { Db, Transaction } from '@svc/platform';
import type { Modo, Webhook } from '@svc/contracts';
import type { CompanyScope } from '../companies/company-scope';

/*
 * A scope sees the webhooks of its mode (a test token's are apart from live ones): all of the
 * company's, or (a branch's scope) the company's own and that branch's.
 */

/**
 * Active webhooks of one mode of the company, its branches' included (the limit counts them all,
 * each mode apart). Counted in the transaction that holds the company's lock (`lockCompany`), so
 * the count stays true until the insert.
 */
export async function countActive(trx: Transaction, empresaId: string, modo: Modo): Promise<number> {
  const row = await trx
    .selectFrom('webhooks')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('empresa_id', '=', empresaId)
    .where('modo', '=', modo)
    .where('activo', '=', true)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

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

/** A webhook visible in the scope, active or not; undefined otherwise. */
export async function findWebhook(db: Db, scope: CompanyScope, id: string): Promise<Webhook | undefined> {
  let q = db.selectFrom('webhooks').selectAll().where('id', '=', id).where('empresa_id', '=', scope.empresaId).where('modo', '=', scope.modo);
  if (scope.sucursalId !== null) {
    const sucursalId = scope.sucursalId;
    q = q.where((eb) => eb.or([eb('sucursal_id', 'is', null), eb('sucursal_id', '=', sucursalId)]));
  }
  return q.executeTakeFirst();
}

/** Active webhooks visible in the scope, oldest first. */
export async function listActiveWebhooks(db: Db, scope: CompanyScope): Promise<Webhook[]> {
  let q = db
    .selectFrom('webhooks')
    .selectAll()
    .where('empresa_id', '=', scope.empresaId)
    .where('modo', '=', scope.modo)
    .where('activo', '=', true);
  if (scope.sucursalId !== null) {
    const sucursalId = scope.sucursalId;
    q = q.where((eb) => eb.or([eb('sucursal_id', 'is', null), eb('sucursal_id', '=', sucursalId)]));
  }
  return q.orderBy('created_at').orderBy('id').execute();
}

/**
 * Every webhook of one mode of a company, active or not, oldest first (the portal's tables, which
 * reactivate too): the company's own (`sucursalId` null) or one branch's.
 */
export async function listOwnerWebhooks(db: Db, owner: { empresaId: string; modo: Modo; sucursalId: string | null }): Promise<Webhook[]> {
  let q = db.selectFrom('webhooks').selectAll().where('empresa_id', '=', owner.empresaId).where('modo', '=', owner.modo);
  q = owner.sucursalId === null ? q.where('sucursal_id', 'is', null) : q.where('sucursal_id', '=', owner.sucursalId);
  return q.orderBy('created_at').orderBy('id').execute();
}

/** Active webhooks of a company per mode, its branches' included (the portal's summary). */
export async function countActiveByMode(db: Db, empresaId: string): Promise<Record<Modo, number>> {
  const rows = await db
    .selectFrom('webhooks')
    .select(['modo', (eb) => eb.fn.countAll<string>().as('n')])
    .where('empresa_id', '=', empresaId)
    .where('activo', '=', true)
    .groupBy('modo')
    .execute();
  const out: Record<Modo, number> = { live: 0, test: 0 };
  for (const r of rows) out[r.modo] = Number(r.n);
  return out;
}

/**
 * The company's webhook, locked until the transaction ends: resends and recoveries of one webhook run
 * one after another, and see its `activo` as it is.
 */
export async function lockWebhook(trx: Transaction, empresaId: string, id: string): Promise<Webhook | undefined> {
  return trx.selectFrom('webhooks').selectAll().where('id', '=', id).where('empresa_id', '=', empresaId).forUpdate().executeTakeFirst();
}

/** `activo` among the fields: a reactivation's caller holds the company's lock and has counted (`countActive`). */
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

/**
 * The company's webhook count (`webhook_versions`, kept by a trigger on this table), for the
 * statement that writes an event: the event carries it, and the dispatcher routes the event from
 * routes it holds only if they were read at that count or later. 0 before any webhook.
 */
export function webhooksVersionOf(empresaId: RawBuilder<unknown>): RawBuilder<string> {
  return sql<string>`coalesce((select wv.version from webhook_versions wv where wv.empresa_id = ${empresaId}), 0)`;
}
