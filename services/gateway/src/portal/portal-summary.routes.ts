import type { Router } from 'express';
import { secondsToGuatemalaMidnight } from '@svc/contracts';
import type { GatewayDeps } from '../deps';
import { route } from '../http/route-table';
import { sendData } from '../http/send-json';
import { guatemalaToday } from '../companies/company.repository';
import { presentCompany, requireCompany } from '../companies/company.service';
import { activeWebhookCounts, troubledWebhookViews } from '../webhooks/webhook.service';
import { deliverySummary } from '../deliveries/delivery.service';
import { portalCaller } from './portal-caller';

/**
 * The Resumen page: the company as the internal routes show it, when its day resets (midnight in
 * Guatemala), its active webhooks per mode, its last 24 hours of deliveries, and its webhooks that
 * fail or that the platform deactivated.
 */
export function mountPortalSummaryRoutes(router: Router, deps: GatewayDeps): void {
  route(router, '/resumen', {
    get: async (req, res) => {
      const { empresaId } = portalCaller(req);
      const at = deps.clock.now();
      const [empresa, today, activos, entregas, conProblemas] = await Promise.all([
        requireCompany(deps.db, empresaId),
        guatemalaToday(deps.db),
        activeWebhookCounts(deps, empresaId),
        deliverySummary(deps, empresaId, at),
        troubledWebhookViews(deps, empresaId, at),
      ]);
      sendData(res, 200, {
        empresa: presentCompany(empresa, today),
        reiniciaEn: new Date(at.getTime() + secondsToGuatemalaMidnight(at) * 1000).toISOString(),
        webhooksActivos: activos,
        entregas,
        webhooksConProblemas: conProblemas,
      });
    },
  });
}
