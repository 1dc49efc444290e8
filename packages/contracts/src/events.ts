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
export type EventName = ShipmentEvent | 'PING';

/** Every event a delivery can carry. */
export const EVENT_NAMES: readonly EventName[] = [...SHIPMENT_EVENTS, 'PING'];

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
