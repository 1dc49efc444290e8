import type { Router } from 'express';
import type { GatewayDeps } from '../deps';
import { route } from '../http/route-table';
import { pageParams } from '../http/query-params';
import { sendData } from '../http/send-json';
import { listActivity } from '../activity/activity.repository';
import { portalCaller } from './portal-caller';

/** The Actividad page: the company's activity log, newest first, a page at a time. */
export function mountPortalActivityRoutes(router: Router, deps: GatewayDeps): void {
  route(router, '/actividad', {
    get: async (req, res) => {
      // The cursor is the last entry's id, checked by listActivity (400 when it is not one).
      const { limit, after } = pageParams(req.query as Record<string, unknown>, (cursor) => cursor);
      const page = await listActivity(deps.db, portalCaller(req).empresaId, { limit, ...(after === undefined ? {} : { before: after }) });
      sendData(res, 200, {
        actividades: page.items.map((a) => ({
          id: a.id,
          accion: a.accion,
          usuario: a.usuario,
          sucursalId: a.sucursalId,
          webhookId: a.webhookId,
          detalle: a.detalle,
          createdAt: a.createdAt.toISOString(),
        })),
        nextCursor: page.nextCursor,
      });
    },
  });
}
