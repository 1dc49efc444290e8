// `pnpm start` runs this before the services: the gateway serves the portal from its build
// (services/portal/dist), so the build is made when it is missing or older than any of its sources.
// A build that is up to date costs a directory walk. `pnpm --filter @svc/portal dev` is the live
// development server (Vite, the API proxied to :3000) for working on the pages themselves.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';

const portal = resolve(import.meta.dirname, '../services/portal');
const built = join(portal, 'dist/index.html');

function newest(path) {
  const s = statSync(path);
  if (!s.isDirectory()) return s.mtimeMs;
  let t = 0;
  for (const entry of readdirSync(path)) t = Math.max(t, newest(join(path, entry)));
  return t;
}

// The portal bundles the contracts' pure modules by path (its api.ts and format.ts): a change there is a change of the portal.
const sources = ['src', 'public', 'index.html', 'vite.config.ts', 'package.json', '../../packages/contracts/src'].map((p) => join(portal, p)).filter(existsSync);
const stale = !existsSync(built) || Math.max(...sources.map(newest)) > statSync(built).mtimeMs;
if (stale) {
  console.log('portal: building services/portal (its build is missing or older than its sources)');
  const r = spawnSync('pnpm', ['--filter', '@svc/portal', 'build'], { stdio: 'inherit' });
  if (r.status !== 0) {
    console.error('portal: the build failed; see above');
    process.exit(r.status ?? 1);
  }
}
