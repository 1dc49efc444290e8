import type { Logger } from '@svc/observability';
import type { PortalSession } from './portal-session.middleware';

/**
 * What the portal does on a company's behalf, as portal.md's Actividad lists it: tokens generated,
 * regenerated or deleted (company or branch), webhooks created, changed, deactivated or reactivated,
 * secrets rotated, resends and recoveries, sessions started.
 */
export type PortalAction =
  | 'TOKENS_GENERADOS'
  | 'TOKENS_REGENERADOS'
  | 'TOKENS_ELIMINADOS'
  | 'WEBHOOK_CREADO'
  | 'WEBHOOK_MODIFICADO'
  | 'WEBHOOK_DESACTIVADO'
  | 'WEBHOOK_REACTIVADO'
  | 'SECRETO_ROTADO'
  | 'ENTREGA_REENVIADA'
  | 'ENTREGAS_RECUPERADAS'
  | 'SESION_INICIADA';

/** What an action touched; never a token or a secret. */
export interface PortalActivityDetail {
  sucursalId?: string | null;
  webhookId?: string | null;
  /** A short, secret-free description (the mode, the URL, the number resent...). */
  detalle?: Record<string, unknown>;
}

/**
 * Every portal action goes through here, with the `usuario` of the link the session came from. Until
 * the activity log (`actividad`) exists it is written to the gateway's log only; wiring it to the log's
 * repository is this one function.
 */
export function recordPortalActivity(
  deps: { logger: Logger },
  session: Pick<PortalSession, 'id' | 'empresaId' | 'usuario'>,
  accion: PortalAction,
  detail: PortalActivityDetail = {},
): Promise<void> {
  deps.logger.info(
    {
      accion,
      usuario: session.usuario,
      empresaId: session.empresaId,
      portalSessionId: session.id,
      sucursalId: detail.sucursalId ?? null,
      webhookId: detail.webhookId ?? null,
      detalle: detail.detalle ?? null,
    },
    'portal activity',
  );
  return Promise.resolve();
}
