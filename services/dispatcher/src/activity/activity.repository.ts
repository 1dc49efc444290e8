import type { Transaction } from '@svc/platform';

/** `usuario` of what the platform does by itself (portal.md, Actividad): an automatic deactivation. */
export const SYSTEM_USER = 'sistema';

/**
 * The dispatcher's one write of the activity log (`actividad`, the gateway's to read and page): the
 * platform's own deactivation of a webhook, in the transaction that makes it, so the entry exists
 * exactly when the deactivation does. Its detail is the reason, never a URL or a secret.
 */
export async function recordAutoDeactivation(
  trx: Transaction,
  entry: { empresaId: string; sucursalId: string | null; webhookId: string; motivo: string },
): Promise<void> {
  await trx
    .insertInto('actividad')
    .values({
      empresa_id: entry.empresaId,
      usuario: SYSTEM_USER,
      accion: 'webhook.deactivated',
      sucursal_id: entry.sucursalId,
      webhook_id: entry.webhookId,
      detalle: JSON.stringify({ motivo: entry.motivo }),
    })
    .execute();
}
