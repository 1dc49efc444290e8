import { sql } from 'kysely';
import type { Db, Transaction, Webhook } from '@svc/schema';

/** Which webhooks a caller may see: all of a company's, or (a branch token) the company's own and that branch's. */
export interface WebhookScope {
  empresaId: string;
  /** Set for a branch token. */
  sucursalId: string | null;
}

/**
 * Active webhooks of the company, its branches' included (the limit counts them all). Counted in
 * the transaction that holds the company's lock (`lockCompany`), so the count stays true until
 * the insert.
 */
export async function countActive(trx: Transaction, empresaId: string): Promise<number> {
  const row = await trx
    .selectFrom('webhooks')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('empresa_id', '=', empresaId)
    .where('activo', '=', true)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export async function insertWebhook(
  trx: Transaction,
  w: { empresaId: string; sucursalId: string | null; url: string; secret: string; eventos: string[]; descripcion: string | null },
): Promise<Webhook> {
  return trx
    .insertInto('webhooks')
    .values({
      empresa_id: w.empresaId,
      sucursal_id: w.sucursalId,
      url: w.url,
      secret: w.secret,
      eventos: w.eventos,
      descripcion: w.descripcion,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** A webhook visible in the scope, active or not; undefined otherwise. */
export async function findWebhook(db: Db, scope: WebhookScope, id: string): Promise<Webhook | undefined> {
  let q = db.selectFrom('webhooks').selectAll().where('id', '=', id).where('empresa_id', '=', scope.empresaId);
  if (scope.sucursalId !== null) {
    const sucursalId = scope.sucursalId;
    q = q.where((eb) => eb.or([eb('sucursal_id', 'is', null), eb('sucursal_id', '=', sucursalId)]));
  }
  return q.executeTakeFirst();
}

/** Active webhooks visible in the scope, oldest first. */
export async function listActiveWebhooks(db: Db, scope: WebhookScope): Promise<Webhook[]> {
  let q = db
    .selectFrom('webhooks')
    .selectAll()
    .where('empresa_id', '=', scope.empresaId)
    .where('activo', '=', true);
  if (scope.sucursalId !== null) {
    const sucursalId = scope.sucursalId;
    q = q.where((eb) => eb.or([eb('sucursal_id', 'is', null), eb('sucursal_id', '=', sucursalId)]));
  }
  return q.orderBy('created_at').orderBy('id').execute();
}

export async function updateWebhook(
  db: Db,
  empresaId: string,
  id: string,
  fields: { url?: string; eventos?: string[]; descripcion?: string | null },
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
