import type { ActivityAction } from '@svc/contracts';
import type { Db, Transaction } from '@svc/platform';
import { recordActivity, type ActivityDetail } from '../activity/activity.repository';

/** Whom a portal action is recorded as: the session's company and the `usuario` of its link. */
export interface PortalActor {
  empresaId: string;
  usuario: string;
}

/** What an action touched; never a token or a secret (recordActivity refuses one). */
export interface PortalActivityDetail {
  sucursalId?: string | null;
  webhookId?: string | null;
  detalle?: ActivityDetail;
}

/**
 * A portal action of its own (the session's start) in the activity log, with the link's `usuario`:
 * give it the transaction of the action, so the entry exists exactly when the action does. The
 * portal's other actions are the other features' (tokens, webhooks, resends, recoveries): their
 * service functions take the session's `usuario` and write the entry in their own transaction, so
 * each action is in the log once, whichever door it came through.
 */
export function recordPortalActivity(db: Db | Transaction, actor: PortalActor, accion: ActivityAction, detail: PortalActivityDetail = {}): Promise<void> {
  return recordActivity(db, {
    empresaId: actor.empresaId,
    usuario: actor.usuario,
    accion,
    sucursalId: detail.sucursalId ?? null,
    webhookId: detail.webhookId ?? null,
    detalle: detail.detalle ?? null,
  });
}
