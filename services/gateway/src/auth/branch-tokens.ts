import type { Db, Transaction } from '@svc/platform';
import type { TokenCache } from './token-cache';
import { hashesOfBranches, hashesOfCompany } from './token.repository';

/**
 * A company's branch tokens work only while it has branches enabled (the lookup in
 * `findPrincipalByHash` says so). Disabling them must also reach the principals every gateway has
 * cached: the branch hashes are marked revoked in Redis, which the rate-limit script checks on
 * every request, before the change commits, as a token rotation does, so no gateway serves one
 * more request with them. If Redis cannot take the marks, nothing changes (503).
 */
export async function suspendBranchTokens(trx: Transaction, cache: TokenCache, empresaId: string): Promise<void> {
  await cache.invalidate(await hashesOfBranches(trx, empresaId), { revoke: true });
}

/**
 * After a company's change is committed: every instance drops the principals it cached for the
 * company (they carry its name and branch setting). When branches were enabled again, the marks
 * `suspendBranchTokens` left are lifted first, so the branch tokens work at once; a gateway that
 * cached a failed lookup of one drops it when the message reaches it.
 */
export async function refreshCompanyTokens(db: Db, cache: TokenCache, empresaId: string, branchesEnabled: boolean | undefined): Promise<void> {
  if (branchesEnabled === true) await cache.restore(await hashesOfBranches(db, empresaId));
  await cache.invalidate(await hashesOfCompany(db, empresaId), { revoke: false });
}
