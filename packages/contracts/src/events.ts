/** Shipment events, as named by the integrators' contract. PING is sent only by the test operation. */
export const SHIPMENT_EVENTS = [
  'GUIA_CREADA',
  'GUIA_RECOLECTADA',
  'GUIA_EN_BODEGA',
  'GUIA_EN_RUTA',
  'GUIA_ENTREGADA',
  'GUIA_DEVOLUCION',
  'GUIA_ANULADA',
  'GUIA_ACTUALIZADA',
  'GUIA_INTENTO_FALLIDO',
] as const;

export type ShipmentEvent = (typeof SHIPMENT_EVENTS)[number];

/**
 * The platform's notices about a company's own webhooks (extensions.md, Endpoint health): not
 * shipment events. They reach only webhooks that list them in `eventos` by name (an empty list
 * means every shipment event, never these), never the webhook they are about.
 */
export const NOTICE_EVENTS = ['WEBHOOK_FALLANDO', 'WEBHOOK_DESACTIVADO'] as const;
export type NoticeEvent = (typeof NOTICE_EVENTS)[number];

/** What the event log (`outbox`) carries: shipment events and notices. */
export type LoggedEvent = ShipmentEvent | NoticeEvent;

export type EventName = LoggedEvent | 'PING';

/** Every event a delivery can carry. */
export const EVENT_NAMES: readonly EventName[] = [...SHIPMENT_EVENTS, ...NOTICE_EVENTS, 'PING'];

/** The names a webhook's `eventos` may list. */
export const SUBSCRIBABLE_EVENTS: readonly LoggedEvent[] = [...SHIPMENT_EVENTS, ...NOTICE_EVENTS];

export const isNoticeEvent = (evento: string): evento is NoticeEvent => (NOTICE_EVENTS as readonly string[]).includes(evento);

/** Why the platform deactivated a webhook (`desactivacion.motivo`, the notices' `motivo`). */
export const AUTO_DISABLE_REASONS = ['FALLAS_CONTINUAS', 'GONE'] as const;
export type AutoDisableReason = (typeof AUTO_DISABLE_REASONS)[number];

/** Who deactivated a webhook (`desactivacion.por`): the platform, the company (a token or the portal), the operator. */
export type DeactivatedBy = 'sistema' | 'empresa' | 'operador';

/** `data` of a notice, exactly: `motivo` is null for WEBHOOK_FALLANDO. */
export interface WebhookNoticeData {
  webhook: { id: string; url: string; descripcion: string | null };
  motivo: AutoDisableReason | null;
  fallasConsecutivas: number;
  /** ISO 8601: when the run of failures began. */
  desde: string | null;
}

export const ESTADOS = [
  'CREADA',
  'RECOLECTADA',
  'EN_BODEGA',
  'EN_RUTA',
  'ENTREGADO',
  'INTENTO_FALLIDO',
  'DEVOLUCION',
  'ANULADA',
] as const;

export type Estado = (typeof ESTADOS)[number];

/** `data` of a shipment event, per the contract's Events table. */
export interface ShipmentEventData {
  numeroGuia: string;
  estado: Estado;
  fechaEntrega?: string;
  motivo?: string;
}

/** `data` of the GUIA_CREADA event of a new shipment: defined here only, for every writer of it. */
export function guiaCreadaData(numeroGuia: string): ShipmentEventData {
  return { numeroGuia, estado: 'CREADA' };
}
