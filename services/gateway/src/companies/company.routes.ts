import type { Router } from 'express';
import type { GatewayDeps } from '../deps';
import { route } from '../http/route-table';
import { sendJson } from '../http/send-json';
import { principalOf } from './company-scope';

/** `GET /api/v1/empresa`: who the token belongs to, and in which mode it works. */
export function mountCompanyRoutes(router: Router, _deps: GatewayDeps): void {
  route(router, '/empresa', {
    get: (req, res) => {
      const p = principalOf(req);
      sendJson(res, 200, {
        success: true,
        data: {
          id: p.empresa.id,
          nombre: p.empresa.nombre,
          sucursalesHabilitadas: p.empresa.sucursalesHabilitadas,
          sucursal: p.sucursal,
          modo: p.modo,
        },
      });
    },
  });
}
