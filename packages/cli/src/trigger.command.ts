import { call, CliError, type ApiOptions } from './api.client.js';
import { shortestPath, TRIGGER_EVENTS } from './status-machine.js';

/** The sandbox shipment `trigger` creates: a recipient that is obviously a test. */
const SAMPLE_SHIPMENT = {
  destinatario: { nombre: 'Cliente de prueba', telefono: '5555-0000', direccion: '6a avenida 1-23, zona 1, Ciudad de Guatemala' },
  paquete: { peso: 1.5, descripcion: 'Paquete de prueba de svc trigger' },
  referencia: 'SVC-TRIGGER',
};

/** What `simular` takes for an event: `motivo` and `fechaEntrega` get example values, so nothing is asked. */
function simulation(evento: string): Record<string, string> {
  if (evento === 'GUIA_DEVOLUCION') return { evento, motivo: 'Devolución de prueba (svc trigger)' };
  if (evento === 'GUIA_INTENTO_FALLIDO') return { evento, motivo: 'Destinatario ausente (svc trigger)' };
  if (evento === 'GUIA_ENTREGADA') return { evento, fechaEntrega: new Date().toISOString() };
  return { evento };
}

/**
 * `svc trigger <evento>`: a new sandbox shipment moved with `simular` along the shortest path of
 * the status machine to `evento`; prints its numeroGuia. Each step's event reaches the sessions
 * and test webhooks of the token's scope.
 */
export async function trigger(o: ApiOptions & { evento: string; print(line: string): void }): Promise<number> {
  const path = shortestPath(o.evento);
  if (path === undefined) throw new CliError(`unknown event ${o.evento}: one of ${TRIGGER_EVENTS.join(', ')}`);
  const created = await call<{ numeroGuia: string }>(o, 'POST', '/api/v1/guias', SAMPLE_SHIPMENT);
  o.print(`> GUIA_CREADA  ${created.numeroGuia}`);
  for (const evento of path) {
    const moved = await call<{ estado: string }>(o, 'POST', `/api/v1/guias/${encodeURIComponent(created.numeroGuia)}/simular`, simulation(evento));
    o.print(`> ${evento}  ${created.numeroGuia}  ${moved.estado}`);
  }
  o.print(created.numeroGuia);
  return 0;
}
