import { ESTADOS, SHIPMENT_EVENTS } from '@svc/contracts';
import { nextEstado } from '../../../services/gateway/src/shipments/shipment-state.js';
import { next, shortestPath } from '../src/status-machine.js';

/** The tool's copy of the status machine is the API's, move for move; trigger's paths are the shortest. */
describe('svc trigger: the status machine', () => {
  it('moves exactly as the API does, from every status, on every event', () => {
    for (const estado of ESTADOS) {
      for (const evento of SHIPMENT_EVENTS.filter((e) => e !== 'GUIA_CREADA')) {
        expect({ estado, evento, to: next(estado, evento) }).toEqual({ estado, evento, to: nextEstado(estado, evento) });
      }
    }
  });

  it('walks the shortest path to each event', () => {
    expect(shortestPath('GUIA_CREADA')).toEqual([]);
    expect(shortestPath('GUIA_ENTREGADA')).toEqual(['GUIA_RECOLECTADA', 'GUIA_EN_BODEGA', 'GUIA_EN_RUTA', 'GUIA_ENTREGADA']);
    expect(shortestPath('GUIA_ANULADA')).toEqual(['GUIA_ANULADA']);
    expect(shortestPath('GUIA_DEVOLUCION')).toEqual(['GUIA_RECOLECTADA', 'GUIA_EN_BODEGA', 'GUIA_DEVOLUCION']);
    expect(shortestPath('GUIA_ACTUALIZADA')).toEqual(['GUIA_ACTUALIZADA']);
    expect(shortestPath('NADA')).toBeUndefined();
  });
});
