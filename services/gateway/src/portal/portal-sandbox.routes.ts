import type { Router } from 'express';
import { SHIPMENT_EVENTS, type ShipmentEvent } from '@svc/contracts';
import type { GatewayDeps } from '../deps';
import { route } from '../http/route-table';
import { sendData, sendJson } from '../http/send-json';
import { shipmentHandlers } from '../shipments/shipment.routes';
import { createShipments, tracking } from '../shipments/shipment.service';
import { nextEstado } from '../shipments/shipment-state';
import { shipmentDeliveryViews } from '../deliveries/delivery.service';
import { listSessions } from '../listen/listen.service';
import { sandboxDoor } from './portal-caller';

/** A sandbox shipment made by "Crear guía de prueba": a recipient that is obviously a test. */
const SAMPLE_SHIPMENT = {
  destinatario: { nombre: 'Cliente de prueba', telefono: '5555-0000', direccion: '6a avenida 1-23, zona 1, Ciudad de Guatemala' },
  paquete: { peso: 1.5, descripcion: 'Paquete de prueba del portal' },
  referencia: 'PORTAL-SANDBOX',
};

const TRANSITIONS = SHIPMENT_EVENTS.filter((e): e is Exclude<ShipmentEvent, 'GUIA_CREADA'> => e !== 'GUIA_CREADA');

/**
 * The Sandbox page, in the company's test world: the listing and `simular` are `/api/v1`'s own
 * handlers; "Crear guía de prueba" creates a sample shipment through the API's creation service,
 * and a shipment's page adds the events it may take next and the deliveries its events made.
 * **Sesiones de escucha** lists the company's open `svc listen` sessions (its branches' too) with
 * their latest deliveries, as `GET /api/v1/escuchas` does for a company test token.
 */
export function mountPortalSandboxRoutes(router: Router, deps: GatewayDeps): void {
  const shipments = shipmentHandlers(deps, sandboxDoor);

  route(router, '/sandbox/guias', {
    get: shipments.list,
    post: async (req, res) => {
      const owner = sandboxDoor.scope(req);
      const answer = await createShipments(deps, { owner, requestId: req.requestId, idempotency: undefined }, [SAMPLE_SHIPMENT], 'single');
      sendJson(res, answer.status, answer.body);
    },
  });

  route(router, '/sandbox/guias/:numeroGuia', {
    get: async (req, res) => {
      const scope = sandboxDoor.scope(req);
      const tracked = await tracking(deps, scope, String(req.params.numeroGuia));
      const created = tracked.historial[0] ? new Date(tracked.historial[0].fecha) : deps.clock.now();
      const entregas = await shipmentDeliveryViews(deps, {
        empresaId: scope.empresaId,
        modo: scope.modo,
        numeroGuia: tracked.numeroGuia,
        // A minute's margin: the history's time and the deliveries' are both Postgres's, read apart.
        since: new Date(created.getTime() - 60_000),
      });
      sendData(res, 200, {
        ...tracked,
        eventosPermitidos: TRANSITIONS.filter((e) => nextEstado(tracked.estado, e) !== undefined),
        entregas,
      });
    },
  });

  route(router, '/sandbox/guias/:numeroGuia/simular', { post: shipments.simulate });

  route(router, '/sandbox/escuchas', {
    get: async (req, res) => {
      sendData(res, 200, await listSessions(deps, sandboxDoor.scope(req)));
    },
  });
}
