import type { Request, RequestHandler, Router } from 'express';
import type { GatewayDeps } from '../deps';
import { route } from '../http/route-table';
import { sendData } from '../http/send-json';
import { tokenPairGeneratedAt } from '../auth/token.repository';
import { deleteTokens, issueTokens, requireBranch, requireCompany, type TokenOwner } from '../companies/company.service';
import { portalCaller } from './portal-caller';
import { requirePortalBranch } from './portal-branches.routes';

/** Whose pair a route is about: the session's company, or one of its branches (checked first). */
type OwnerOf = (req: Request) => TokenOwner | Promise<TokenOwner>;

/**
 * The Tokens page and each branch's pair on the Sucursales page: "Generar tokens" (and regenerar)
 * and "Eliminar tokens" run `issueTokens` and `deleteTokens`, the internal routes' own services, so
 * an old pair stops at once on every gateway; the activity log names the session's `usuario`.
 */
export function mountPortalTokenRoutes(router: Router, deps: GatewayDeps): void {
  const issue = (ownerOf: OwnerOf): RequestHandler => async (req, res) => {
    const owner = await ownerOf(req);
    sendData(res, 201, await issueTokens(deps, owner, portalCaller(req).usuario));
  };
  const remove = (ownerOf: OwnerOf): RequestHandler => async (req, res) => {
    const owner = await ownerOf(req);
    sendData(res, 200, { eliminados: await deleteTokens(deps, owner, portalCaller(req).usuario) });
  };
  const company = (req: Request): TokenOwner => ({ empresaId: portalCaller(req).empresaId, sucursalId: null });
  const ownerOfBranch = (b: { empresa_id: string; id: string }): TokenOwner => ({ empresaId: b.empresa_id, sucursalId: b.id });
  const branch = async (req: Request): Promise<TokenOwner> => ownerOfBranch(await requirePortalBranch(deps, req));

  route(router, '/tokens', {
    get: async (req, res) => {
      const owner = company(req);
      const [empresa, at] = await Promise.all([requireCompany(deps.db, owner.empresaId), tokenPairGeneratedAt(deps.db, owner)]);
      sendData(res, 200, { generadosEn: at ? at.toISOString() : null, verificada: empresa.verificada });
    },
    post: issue(company),
    delete: remove(company),
  });

  // Whatever the branch setting: the head account can always stop a branch's tokens.
  const anyBranch = async (req: Request): Promise<TokenOwner> => ownerOfBranch(await requireBranch(deps.db, portalCaller(req).empresaId, String(req.params.sid)));
  // To issue, the branch's rule (branches enabled, the branch the company's) is checked before the pair's.
  route(router, '/sucursales/:sid/tokens', { post: issue(branch), delete: remove(anyBranch) });
}
