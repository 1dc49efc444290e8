// The runtime build of a service: its entry points bundled by esbuild into dist/*.js, run with plain
// `node` (no tsx, no TypeScript at run time). Run from the service's folder (its `build` script):
//
//   node ../../scripts/bundle.mjs src/main.ts [more entries: name=path ...]
//
// The workspace packages (@svc/contracts, @svc/platform, ...) are inlined from their sources: their
// package.json `main` stays on src/index.ts for dev, tests and tsx. npm packages stay external and
// are loaded from node_modules at run time, as the lockfile installed them. An npm package imported
// by a workspace package is not a dependency of the service itself (pnpm's node_modules is strict), so
// it is required from that package's own folder: `createRequire(<@svc/platform's package.json>)('pg')`,
// the very resolution Node would do for the package, in the workspace and in a `pnpm deploy` tree alike.
import { readFileSync, readdirSync, existsSync, rmSync } from 'node:fs';
import { basename, join, relative, resolve, sep } from 'node:path';
import { isBuiltin } from 'node:module';
import { build } from 'esbuild';

const ROOT = resolve(import.meta.dirname, '..');
const cwd = process.cwd();
const readJson = (path) => JSON.parse(readFileSync(path, 'utf8'));

/** Every workspace package by name, with its folder. */
const workspace = new Map();
for (const group of ['packages', 'services']) {
  for (const dir of readdirSync(join(ROOT, group))) {
    const manifest = join(ROOT, group, dir, 'package.json');
    if (existsSync(manifest)) workspace.set(readJson(manifest).name, join(ROOT, group, dir));
  }
}
const service = readJson(join(cwd, 'package.json'));
const workspaceDeps = (m) => Object.keys({ ...m.dependencies }).filter((d) => workspace.has(d));

/** For each workspace package the service reaches, the chain of packages it is reached through. */
const chains = new Map(); // folder -> ['@svc/webhook-sender', '@svc/webhook-signature']
const queue = workspaceDeps(service).map((name) => [name]);
while (queue.length) {
  const chain = queue.shift();
  const dir = workspace.get(chain.at(-1));
  if (chains.has(dir)) continue;
  chains.set(dir, chain);
  for (const dep of workspaceDeps(readJson(join(dir, 'package.json')))) queue.push([...chain, dep]);
}
const chainOf = (file) => {
  for (const [dir, chain] of chains) if (file.startsWith(dir + sep)) return chain;
  return undefined;
};
const BARE = /^[^./]/; // esbuild's filters are Go regular expressions: no look-ahead
const packageName = (spec) => spec.split('/').slice(0, spec.startsWith('@') ? 2 : 1).join('/');

/** npm imports of workspace packages: required from the package's own folder at run time. */
const workspaceExternals = {
  name: 'workspace-externals',
  setup(b) {
    b.onResolve({ filter: /^ws-require-runtime$/ }, () => ({ path: 'ws-require-runtime', namespace: 'ws-runtime' }));
    b.onResolve({ filter: BARE }, (args) => {
      if (args.path.startsWith('node:') || workspace.has(packageName(args.path))) return undefined; // built in / inlined from its sources
      const chain = args.importer ? chainOf(args.importer) : undefined;
      // Checked here, not at run time: in the workspace an undeclared package may still resolve
      // (from the root's node_modules), in a deployed tree it would not.
      const owner = chain ? readJson(join(workspace.get(chain.at(-1)), 'package.json')) : service;
      const name = packageName(args.path);
      const declared = { ...owner.dependencies, ...owner.optionalDependencies, ...owner.peerDependencies };
      if (!(name in declared) && !isBuiltin(args.path)) {
        return { errors: [{ text: `${owner.name} imports ${name} without listing it in its dependencies` }] };
      }
      if (!chain) return { path: args.path, external: true }; // the service's own dependency
      return { path: args.path, namespace: 'ws-require', pluginData: chain };
    });
    b.onLoad({ filter: /.*/, namespace: 'ws-require' }, (args) => ({
      loader: 'js',
      resolveDir: cwd,
      contents: `module.exports = require('ws-require-runtime')(${JSON.stringify(args.pluginData)})(${JSON.stringify(args.path)});`,
    }));
    b.onLoad({ filter: /.*/, namespace: 'ws-runtime' }, () => ({
      loader: 'js',
      contents: `const { createRequire } = require('node:module');
const cache = new Map();
module.exports = (chain) => {
  const key = chain.join(' ');
  let r = cache.get(key);
  if (!r) {
    r = require;
    for (const name of chain) r = createRequire(r.resolve(name + '/package.json'));
    cache.set(key, r);
  }
  return r;
};`,
    }));
  },
};

const entryPoints = process.argv.slice(2).map((arg) => {
  const [name, path] = arg.includes('=') ? arg.split('=') : [basename(arg).replace(/\.ts$/, ''), arg];
  return { in: resolve(cwd, path), out: name };
});
if (entryPoints.length === 0) throw new Error('usage: node scripts/bundle.mjs <entry.ts> [name=<entry.ts> ...]');
for (const e of entryPoints) rmSync(join(cwd, 'dist', `${e.out}.js`), { force: true });

const result = await build({
  entryPoints,
  outdir: join(cwd, 'dist'),
  bundle: true,
  platform: 'node',
  target: 'node24',
  format: 'cjs',
  keepNames: true,
  legalComments: 'none',
  logLevel: 'warning',
  metafile: true,
  plugins: [workspaceExternals],
});
for (const [out, meta] of Object.entries(result.metafile.outputs)) {
  console.log(`${relative(ROOT, resolve(cwd, out))}: ${(meta.bytes / 1024).toFixed(0)} kB`);
}
