/**
 * The courier's status machine as `svc trigger` walks it: for each event, the statuses it may
 * leave from and where it goes (the API's own, services/gateway/src/shipments/shipment-state.ts;
 * packages/cli/test/status-machine.test.ts holds the two equal). A copy, so that the published
 * tool depends on nothing of the workspace.
 */
export type Estado = 'CREADA' | 'RECOLECTADA' | 'EN_BODEGA' | 'EN_RUTA' | 'ENTREGADO' | 'INTENTO_FALLIDO' | 'DEVOLUCION' | 'ANULADA';

export const TRANSITIONS: Readonly<Record<string, { from: readonly Estado[]; to: Estado | 'same' }>> = {
  GUIA_RECOLECTADA: { from: ['CREADA'], to: 'RECOLECTADA' },
  GUIA_EN_BODEGA: { from: ['RECOLECTADA', 'INTENTO_FALLIDO'], to: 'EN_BODEGA' },
  GUIA_EN_RUTA: { from: ['EN_BODEGA', 'INTENTO_FALLIDO'], to: 'EN_RUTA' },
  GUIA_ENTREGADA: { from: ['EN_RUTA'], to: 'ENTREGADO' },
  GUIA_INTENTO_FALLIDO: { from: ['EN_RUTA'], to: 'INTENTO_FALLIDO' },
  GUIA_DEVOLUCION: { from: ['EN_BODEGA', 'EN_RUTA', 'INTENTO_FALLIDO'], to: 'DEVOLUCION' },
  GUIA_ANULADA: { from: ['CREADA', 'RECOLECTADA'], to: 'ANULADA' },
  // An update of the shipment's data keeps its status, until a final one.
  GUIA_ACTUALIZADA: { from: ['CREADA', 'RECOLECTADA', 'EN_BODEGA', 'EN_RUTA', 'INTENTO_FALLIDO', 'DEVOLUCION'], to: 'same' },
};

/** Every event `trigger` takes: the creation and each transition. */
export const TRIGGER_EVENTS: readonly string[] = ['GUIA_CREADA', ...Object.keys(TRANSITIONS)];

/** Where `evento` leads from `estado`; undefined when it is not allowed there. */
export function next(estado: Estado, evento: string): Estado | undefined {
  const t = TRANSITIONS[evento];
  if (t === undefined || !t.from.includes(estado)) return undefined;
  return t.to === 'same' ? estado : t.to;
}

/**
 * The fewest events after the creation that end with `evento` (breadth first from CREADA); empty
 * for GUIA_CREADA itself, undefined for an unknown event.
 */
export function shortestPath(evento: string): string[] | undefined {
  if (evento === 'GUIA_CREADA') return [];
  if (TRANSITIONS[evento] === undefined) return undefined;
  const queue: Array<{ estado: Estado; path: string[] }> = [{ estado: 'CREADA', path: [] }];
  const seen = new Set<Estado>(['CREADA']);
  for (let item = queue.shift(); item !== undefined; item = queue.shift()) {
    if (next(item.estado, evento) !== undefined) return [...item.path, evento];
    for (const e of Object.keys(TRANSITIONS)) {
      const to = next(item.estado, e);
      if (to === undefined || seen.has(to)) continue;
      seen.add(to);
      queue.push({ estado: to, path: [...item.path, e] });
    }
  }
  return undefined;
}
