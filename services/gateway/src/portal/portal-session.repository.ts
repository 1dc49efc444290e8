import type { Db } from '@svc/platform';

/** The portal's links and sessions (`portal_enlaces`, `portal_sesiones`): hashes of their secrets only. */

export interface PortalSessionRow {
  id: string;
  empresaId: string;
  usuario: string;
  createdAt: Date;
  expiraEn: Date;
}

export async function insertLink(db: Db, link: { empresaId: string; usuario: string; hash: string; expiraEn: Date }): Promise<void> {
  await db
    .insertInto('portal_enlaces')
    .values({ empresa_id: link.empresaId, usuario: link.usuario, hash: link.hash, expira_en: link.expiraEn })
    .execute();
}

/**
 * Marks the link used, once: only an unused link that has not expired at `now` is taken. Returns whom
 * it was for, or undefined (unknown, used, or expired); one statement, so two tabs racing with the
 * same link get one session between them.
 */
export async function takeLink(db: Db, hash: string, now: Date): Promise<{ empresaId: string; usuario: string } | undefined> {
  const row = await db
    .updateTable('portal_enlaces')
    .set({ usado_en: now })
    .where('hash', '=', hash)
    .where('usado_en', 'is', null)
    .where('expira_en', '>', now)
    .returning(['empresa_id', 'usuario'])
    .executeTakeFirst();
  return row && { empresaId: row.empresa_id, usuario: row.usuario };
}

export async function insertSession(
  db: Db,
  s: { empresaId: string; usuario: string; hash: string; now: Date; expiraEn: Date },
): Promise<PortalSessionRow> {
  const row = await db
    .insertInto('portal_sesiones')
    .values({ empresa_id: s.empresaId, usuario: s.usuario, hash: s.hash, created_at: s.now, ultimo_uso_en: s.now, expira_en: s.expiraEn })
    .returning(['id', 'empresa_id', 'usuario', 'created_at', 'expira_en'])
    .executeTakeFirstOrThrow();
  return toSession(row);
}

/**
 * The session whose secret hashes to `hash`, if it is still open at `now` (not ended, before its
 * absolute end, used within `idleMs`), marked used at `now`: the check and the touch are one
 * statement, so a session cannot be touched back to life once idle.
 */
export async function touchSession(db: Db, hash: string, now: Date, idleMs: number): Promise<PortalSessionRow | undefined> {
  const row = await db
    .updateTable('portal_sesiones')
    .set({ ultimo_uso_en: now })
    .where('hash', '=', hash)
    .where('terminada_en', 'is', null)
    .where('expira_en', '>', now)
    .where('ultimo_uso_en', '>', new Date(now.getTime() - idleMs))
    .returning(['id', 'empresa_id', 'usuario', 'created_at', 'expira_en'])
    .executeTakeFirst();
  return row && toSession(row);
}

/** Ends one session (logout). */
export async function endSession(db: Db, id: string, now: Date): Promise<void> {
  await db.updateTable('portal_sesiones').set({ terminada_en: now }).where('id', '=', id).where('terminada_en', 'is', null).execute();
}

/**
 * Ends every open session of the company and voids its unused links (the operator's DELETE): how many
 * sessions ended.
 */
export async function endCompanySessions(db: Db, empresaId: string, now: Date): Promise<number> {
  return db.transaction().execute(async (trx) => {
    await trx.updateTable('portal_enlaces').set({ usado_en: now }).where('empresa_id', '=', empresaId).where('usado_en', 'is', null).execute();
    const ended = await trx
      .updateTable('portal_sesiones')
      .set({ terminada_en: now })
      .where('empresa_id', '=', empresaId)
      .where('terminada_en', 'is', null)
      .where('expira_en', '>', now)
      .executeTakeFirst();
    return Number(ended.numUpdatedRows);
  });
}

/**
 * Removes the company's links and sessions that can no longer open anything (expired or used before
 * `before`): done when the company asks for a new link, so the tables hold about what is live.
 */
export async function pruneCompany(db: Db, empresaId: string, before: Date): Promise<void> {
  await db
    .deleteFrom('portal_enlaces')
    .where('empresa_id', '=', empresaId)
    .where((eb) => eb.or([eb('expira_en', '<', before), eb('usado_en', '<', before)]))
    .execute();
  await db
    .deleteFrom('portal_sesiones')
    .where('empresa_id', '=', empresaId)
    .where((eb) => eb.or([eb('expira_en', '<', before), eb('terminada_en', '<', before)]))
    .execute();
}

function toSession(r: { id: string; empresa_id: string; usuario: string; created_at: Date; expira_en: Date }): PortalSessionRow {
  return { id: r.id, empresaId: r.empresa_id, usuario: r.usuario, createdAt: r.created_at, expiraEn: r.expira_en };
}
