import type { AutoDisableReason, DeactivatedBy, Webhook } from '@svc/contracts';

/**
 * A webhook's health as its row keeps it (extensions.md, Endpoint health): the dispatcher counts
 * each ended delivery into the row, so the state is read, never worked out from the delivery log.
 */

export type HealthState = 'saludable' | 'degradado' | 'fallando' | 'desactivado';

export interface WebhookHealth {
  estado: HealthState;
  desde: string | null;
  ultimoExito: string | null;
  fallasConsecutivas: number;
  desactivacion: { fecha: string; por: DeactivatedBy; motivo: AutoDisableReason | null } | null;
}

/** How long a failure keeps a webhook that succeeds again `degradado`: the health's last 24 hours. */
export const DEGRADED_FOR_MS = 24 * 3_600_000;

const iso = (d: Date | null): string | null => d?.toISOString() ?? null;

/**
 * - `desactivado` while `activo` is false, since its deactivation;
 * - `fallando` while deliveries have failed since the last success, since the first of them ended;
 * - `degradado` when the last one succeeded but one failed in the last 24 hours, since the success
 *   that ended the failures;
 * - `saludable` otherwise, since the later of that success and the last failure's 24 hours (null
 *   with no delivery yet).
 */
export function healthOf(w: Webhook, now: Date): WebhookHealth {
  const common = { ultimoExito: iso(w.salud_ultimo_exito), fallasConsecutivas: w.salud_fallas };
  if (!w.activo) {
    const fecha = w.desactivado_en ?? w.updated_at;
    // Deactivated before who did it was recorded: by hand (the platform did not deactivate then).
    const por = w.desactivado_por ?? 'empresa';
    return {
      ...common,
      estado: 'desactivado',
      desde: fecha.toISOString(),
      desactivacion: { fecha: fecha.toISOString(), por, motivo: por === 'sistema' ? w.desactivado_motivo : null },
    };
  }
  if (w.salud_fallas > 0) return { ...common, estado: 'fallando', desde: iso(w.salud_fallando_desde), desactivacion: null };
  const lastFailure = w.salud_ultima_falla;
  if (lastFailure !== null && now.getTime() - lastFailure.getTime() < DEGRADED_FOR_MS) {
    return { ...common, estado: 'degradado', desde: iso(w.salud_estable_desde ?? lastFailure), desactivacion: null };
  }
  const since = [w.salud_estable_desde?.getTime(), lastFailure ? lastFailure.getTime() + DEGRADED_FOR_MS : undefined].filter((t): t is number => t !== undefined);
  return { ...common, estado: 'saludable', desde: since.length > 0 ? new Date(Math.max(...since)).toISOString() : null, desactivacion: null };
}
