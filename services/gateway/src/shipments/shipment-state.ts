import type { Estado, ShipmentEvent } from '@svc/contracts';

type TransitionEvent = Exclude<ShipmentEvent, 'GUIA_CREADA'>;

/** The courier's state machine: for each event, the statuses it may leave from and where it goes. */
const MOVES: Record<Exclude<TransitionEvent, 'GUIA_ACTUALIZADA'>, { from: readonly Estado[]; to: Estado }> = {
  GUIA_RECOLECTADA: { from: ['CREADA'], to: 'RECOLECTADA' },
  GUIA_EN_BODEGA: { from: ['RECOLECTADA', 'INTENTO_FALLIDO'], to: 'EN_BODEGA' },
  GUIA_EN_RUTA: { from: ['EN_BODEGA', 'INTENTO_FALLIDO'], to: 'EN_RUTA' },
  GUIA_ENTREGADA: { from: ['EN_RUTA'], to: 'ENTREGADO' },
  GUIA_INTENTO_FALLIDO: { from: ['EN_RUTA'], to: 'INTENTO_FALLIDO' },
  GUIA_DEVOLUCION: { from: ['EN_BODEGA', 'EN_RUTA', 'INTENTO_FALLIDO'], to: 'DEVOLUCION' },
  GUIA_ANULADA: { from: ['CREADA', 'RECOLECTADA'], to: 'ANULADA' },
};

/** Statuses after which nothing about the shipment changes any more. */
const FINAL: readonly Estado[] = ['ENTREGADO', 'ANULADA'];

/** The status the event leads to from `estado`, or undefined when the event is not allowed there. */
export function nextEstado(estado: Estado, evento: TransitionEvent): Estado | undefined {
  // An update of the shipment's data keeps its status.
  if (evento === 'GUIA_ACTUALIZADA') return FINAL.includes(estado) ? undefined : estado;
  const move = MOVES[evento];
  return move.from.includes(estado) ? move.to : undefined;
}
