import type { Request, Response, Router } from 'express';
import {
  AppError,
  SHIPMENT_EVENTS,
  secondsToGuatemalaMidnight,
  validateGuiaEvento,
  validatePortalSessionRequest,
  validateRecoveryRequest,
  validateSecretRotation,
  validateWebhookCreate,
  validateWebhookPatch,
  type Empresa,
  type Modo,
  type ShipmentEvent,
} from '@svc/contracts';
import type { GatewayDeps } from '../deps';
import type { Principal } from '../auth/principal';
import { jsonBody } from '../http/body.middleware';
import { pageParams, singleParam } from '../http/query-params';
import { route } from '../http/route-table';
import { sendJson } from '../http/send-json';
import type { RateLimiter } from '../rate-limit/rate-limiter';
import { nextEstado } from '../shipments/shipment-state';
import { listActivity } from '../activity/activity.repository';
import { clearSessionCookie, endBrowserSession, portalSession, sessionOf, setSessionCookie, type PortalSession } from './portal-session.middleware';
import { csrfTokenOf, PORTAL_IDLE_MS, startPortalSession } from './portal-session.service';
import { endSession } from './portal-session.repository';
import { companies, deliveries, guatemalaToday, listBranches, shipments, tokenPairGeneratedAt, webhooks } from './portal.services';

const MODOS: readonly Modo[] = ['live', 'test'];

/** `?modo=live|test` (default live): which of the company's two worlds a webhook call is about. */
function modoOf(req: Request): Modo {
  const value = singleParam(req.query as Record<string, unknown>, 'modo') ?? 'live';
  if (!(MODOS as readonly string[]).includes(value)) throw new AppError('VALIDATION_ERROR', 'modo must be one of live, test');
  return value as Modo;
}

const param = (req: Request, name: string): string => String(req.params[name]);

/** The company as a session sees it: always its own. */
async function companyOf(deps: GatewayDeps, s: PortalSession): Promise<Empresa> {
  return companies.requireCompany(deps.db, s.empresaId);
}

/** What the sandbox's actions run as: the company's test token would be, without one being needed. */
function sandboxPrincipal(e: Empresa, s: PortalSession): Principal {
  return {
    tokenId: `portal:${s.id}`,
    tokenHash: '',
    modo: 'test',
    empresa: { id: e.id, nombre: e.nombre, sucursalesHabilitadas: e.sucursales_habilitadas },
    sucursal: null,
  };
}

/** A sandbox shipment made by "Crear guía de prueba": a recipient that is obviously a test. */
const SAMPLE_SHIPMENT = {
  destinatario: { nombre: 'Cliente de prueba', telefono: '5555-0000', direccion: '6a avenida 1-23, zona 1, Ciudad de Guatemala' },
  paquete: { peso: 1.5, descripcion: 'Paquete de prueba del portal' },
  referencia: 'PORTAL-SANDBOX',
};

const TRANSITIONS = SHIPMENT_EVENTS.filter((e): e is Exclude<ShipmentEvent, 'GUIA_CREADA'> => e !== 'GUIA_CREADA');

const ok = (res: Response, status: number, data: unknown): void => sendJson(res, status, { success: true, data });

/** Who a portal action is recorded as in the activity log: the `usuario` of the session's link. */
const usuarioOf = (req: Request): string => sessionOf(req).usuario;

/**
 * The customer portal's API (portal.md), under `/portal/v1`: the session's exchange, then everything
 * the pages do, each through the same service as `/api/v1` and the internal routes, for the session's
 * own company only. Every action is in the activity log once, with the link's `usuario`: the service
 * functions write it in the action's own transaction (the session's start: `startPortalSession`).
 */
export function mountPortalRoutes(router: Router, deps: GatewayDeps, limiter: RateLimiter): void {
  const guard = portalSession(deps, limiter);
  const now = () => deps.clock.now();

  // ---- the session ---------------------------------------------------------------------------------
  route(router, '/sesion', {
    post: [
      jsonBody,
      async (req, res) => {
        const { enlace } = validatePortalSessionRequest(req.body);
        const { session, secret } = await startPortalSession(deps.db, enlace, now());
        await endBrowserSession(deps.db, req, now());
        setSessionCookie(req, res, secret);
        const empresa = await companies.requireCompany(deps.db, session.empresaId);
        ok(res, 201, sessionView(empresa, { ...session, secret }));
      },
    ],
    get: [
      guard,
      async (req, res) => {
        const s = sessionOf(req);
        ok(res, 200, sessionView(await companyOf(deps, s), s));
      },
    ],
    delete: [
      guard,
      async (req, res) => {
        await endSession(deps.db, sessionOf(req).id, now());
        clearSessionCookie(req, res);
        ok(res, 200, { cerrada: true });
      },
    ],
  });

  router.use(guard, jsonBody);

  // ---- Resumen -------------------------------------------------------------------------------------
  route(router, '/resumen', {
    get: async (req, res) => {
      const s = sessionOf(req);
      const at = now();
      const [empresa, today, activos, entregas] = await Promise.all([
        companyOf(deps, s),
        guatemalaToday(deps.db),
        webhooks.activeWebhookCounts(deps, s.empresaId),
        deliveries.deliverySummary(deps, s.empresaId, at),
      ]);
      ok(res, 200, {
        empresa: companies.presentCompany(empresa, today),
        reiniciaEn: new Date(at.getTime() + secondsToGuatemalaMidnight(at) * 1000).toISOString(),
        webhooksActivos: activos,
        entregas,
      });
    },
  });

  // ---- Tokens (the company's, and a branch's) ------------------------------------------------------
  type Owner = { empresaId: string; sucursalId: string | null };
  const issue = async (req: Request, res: Response, o: Owner) => {
    ok(res, 201, await companies.issueTokens(deps, o, usuarioOf(req)));
  };
  const remove = async (req: Request, res: Response, o: Owner) => {
    ok(res, 200, { eliminados: await companies.deleteTokens(deps, o, usuarioOf(req)) });
  };
  const company = (req: Request): Owner => ({ empresaId: sessionOf(req).empresaId, sucursalId: null });

  route(router, '/tokens', {
    get: async (req, res) => {
      const [empresa, at] = await Promise.all([companyOf(deps, sessionOf(req)), tokenPairGeneratedAt(deps.db, company(req))]);
      ok(res, 200, { generadosEn: at ? at.toISOString() : null, verificada: empresa.verificada });
    },
    post: (req, res) => issue(req, res, company(req)),
    delete: (req, res) => remove(req, res, company(req)),
  });

  // ---- Webhooks, of the mode `?modo=` names --------------------------------------------------------
  const scope = (req: Request) => ({ empresaId: sessionOf(req).empresaId, modo: modoOf(req), sucursalId: null });

  route(router, '/webhooks', {
    get: async (req, res) => {
      ok(res, 200, await webhooks.listOwnerWebhookViews(deps, scope(req)));
    },
    post: async (req, res) => {
      const body = validateWebhookCreate(req.body);
      ok(res, 201, await webhooks.createWebhook(deps, scope(req), body, usuarioOf(req)));
    },
  });

  route(router, '/webhooks/:id', {
    get: async (req, res) => {
      ok(res, 200, await webhooks.webhookDetail(deps, scope(req), param(req, 'id')));
    },
    patch: async (req, res) => {
      const body = validateWebhookPatch(req.body);
      ok(res, 200, await webhooks.patchWebhook(deps, scope(req), param(req, 'id'), body, usuarioOf(req)));
    },
    delete: async (req, res) => {
      ok(res, 200, await webhooks.deleteWebhook(deps, scope(req), param(req, 'id'), usuarioOf(req)));
    },
  });

  route(router, '/webhooks/:id/test', {
    post: async (req, res) => {
      ok(res, 200, await webhooks.pingWebhook(deps, scope(req), param(req, 'id')));
    },
  });

  route(router, '/webhooks/:id/secreto', {
    post: async (req, res) => {
      const body = validateSecretRotation(req.body ?? {});
      ok(res, 200, await webhooks.rotateWebhookSecret(deps, scope(req), param(req, 'id'), body, usuarioOf(req)));
    },
  });

  route(router, '/webhooks/:id/entregas', {
    get: async (req, res) => {
      ok(res, 200, await deliveries.deliveryLog(deps, scope(req), param(req, 'id'), withoutModo(req)));
    },
  });

  route(router, '/webhooks/:id/entregas/:entregaId', {
    get: async (req, res) => {
      ok(res, 200, await deliveries.deliveryDetail(deps, scope(req), param(req, 'id'), param(req, 'entregaId')));
    },
  });

  route(router, '/webhooks/:id/entregas/:entregaId/reenviar', {
    post: async (req, res) => {
      ok(res, 202, await deliveries.resendDelivery(deps, scope(req), param(req, 'id'), param(req, 'entregaId'), req.requestId, usuarioOf(req)));
    },
  });

  route(router, '/webhooks/:id/recuperar', {
    post: async (req, res) => {
      const body = validateRecoveryRequest(req.body);
      ok(res, 202, await deliveries.recoverDeliveries(deps, scope(req), param(req, 'id'), body, now(), req.requestId, usuarioOf(req)));
    },
  });

  // ---- Sucursales (branches enabled only) ----------------------------------------------------------
  const branchOf = async (req: Request) => {
    const s = sessionOf(req);
    const empresa = await companyOf(deps, s);
    if (!empresa.sucursales_habilitadas) throw new AppError('SUCURSALES_DESHABILITADAS', 'branches are not enabled for this company');
    return companies.requireBranch(deps.db, empresa.id, param(req, 'sid'));
  };

  route(router, '/sucursales', {
    get: async (req, res) => {
      const s = sessionOf(req);
      const empresa = await companyOf(deps, s);
      if (!empresa.sucursales_habilitadas) throw new AppError('SUCURSALES_DESHABILITADAS', 'branches are not enabled for this company');
      const branches = await listBranches(deps.db, empresa.id);
      const data = await Promise.all(
        branches.map(async (b) => {
          const at = await tokenPairGeneratedAt(deps.db, { empresaId: empresa.id, sucursalId: b.id });
          return {
            id: b.id,
            nombre: b.nombre,
            tokensGeneradosEn: at ? at.toISOString() : null,
            webhooks: await webhooks.listOwnerWebhookViews(deps, { empresaId: empresa.id, modo: 'live', sucursalId: b.id }),
          };
        }),
      );
      ok(res, 200, data);
    },
  });

  const branch = async (req: Request): Promise<Owner> => {
    const b = await branchOf(req);
    return { empresaId: b.empresa_id, sucursalId: b.id };
  };
  // Whatever the branch setting: the head account can always stop a branch's tokens.
  const anyBranch = async (req: Request): Promise<Owner> => {
    const b = await companies.requireBranch(deps.db, sessionOf(req).empresaId, param(req, 'sid'));
    return { empresaId: b.empresa_id, sucursalId: b.id };
  };
  route(router, '/sucursales/:sid/tokens', {
    post: async (req, res) => issue(req, res, await branch(req)),
    delete: async (req, res) => remove(req, res, await anyBranch(req)),
  });

  route(router, '/sucursales/:sid/webhooks', {
    post: async (req, res) => {
      const body = validateWebhookCreate(req.body);
      const sucursal = await branchOf(req);
      // As the internal route: a branch's webhook is live.
      ok(res, 201, await webhooks.createWebhook(deps, { empresaId: sucursal.empresa_id, sucursalId: sucursal.id, modo: 'live' }, body, usuarioOf(req)));
    },
  });

  // ---- Actividad: the company's activity log, newest first -------------------------------------------
  route(router, '/actividad', {
    get: async (req, res) => {
      // The cursor is the last entry's id, checked by listActivity (400 when it is not one).
      const { limit, after } = pageParams(req.query as Record<string, unknown>, (cursor) => cursor);
      const page = await listActivity(deps.db, sessionOf(req).empresaId, { limit, ...(after === undefined ? {} : { before: after }) });
      ok(res, 200, {
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

  // ---- Sandbox ---------------------------------------------------------------------------------------
  const sandboxScope = (req: Request) => ({ empresaId: sessionOf(req).empresaId, modo: 'test' as const, sucursalId: null });

  route(router, '/sandbox/guias', {
    get: async (req, res) => {
      ok(res, 200, await shipments.listPage(deps, sandboxScope(req), req.query as Record<string, unknown>));
    },
    post: async (req, res) => {
      const s = sessionOf(req);
      const principal = sandboxPrincipal(await companyOf(deps, s), s);
      const answer = await shipments.createShipments(deps, { principal, requestId: req.requestId, idempotency: undefined }, [SAMPLE_SHIPMENT], 'single');
      sendJson(res, answer.status, answer.body);
    },
  });

  route(router, '/sandbox/guias/:numeroGuia', {
    get: async (req, res) => {
      const sc = sandboxScope(req);
      const tracked = await shipments.tracking(deps, sc, param(req, 'numeroGuia'));
      const created = tracked.historial[0] ? new Date(tracked.historial[0].fecha) : now();
      const entregas = await deliveries.shipmentDeliveryViews(deps, {
        empresaId: sc.empresaId,
        modo: 'test',
        numeroGuia: tracked.numeroGuia,
        // A minute's margin: the history's time and the deliveries' are both Postgres's, read apart.
        since: new Date(created.getTime() - 60_000),
      });
      ok(res, 200, {
        ...tracked,
        eventosPermitidos: TRANSITIONS.filter((e) => nextEstado(tracked.estado, e) !== undefined),
        entregas,
      });
    },
  });

  route(router, '/sandbox/guias/:numeroGuia/simular', {
    post: async (req, res) => {
      const s = sessionOf(req);
      const principal = sandboxPrincipal(await companyOf(deps, s), s);
      const body = validateGuiaEvento(req.body);
      ok(res, 200, await shipments.simulateTransition(deps, principal, param(req, 'numeroGuia'), body, req.requestId));
    },
  });
}

/** The session as the page needs it: who, for which company, until when, and its anti-CSRF token. */
function sessionView(e: Empresa, s: { usuario: string; expiraEn: Date; secret: string }) {
  return {
    usuario: s.usuario,
    expiraEn: s.expiraEn.toISOString(),
    inactividadSegundos: PORTAL_IDLE_MS / 1000,
    csrfToken: csrfTokenOf(s.secret),
    empresa: { id: e.id, nombre: e.nombre, verificada: e.verificada, sucursalesHabilitadas: e.sucursales_habilitadas },
  };
}

/** The delivery log's own query: `modo` is the portal's, not a filter of the log. */
function withoutModo(req: Request): Record<string, unknown> {
  const { modo: _modo, ...rest } = req.query as Record<string, unknown>;
  return rest;
}
