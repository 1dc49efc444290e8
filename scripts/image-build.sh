#!/usr/bin/env bash
# The images' install, build and deploy steps, in one place: the Dockerfile runs this script, and
# test/infra/image-build.test.ts runs the same script in a temporary copy of the workspace with an
# empty store and HOME. Run from the workspace root.
#
#   scripts/image-build.sh fetch                          # the lockfile alone → the store (network)
#   scripts/image-build.sh deploy <out-dir> <service>...  # offline from here on
#
# fetch:  `pnpm fetch` reads pnpm-lock.yaml only (no package.json needed), so Docker caches the store
#         until the lockfile changes. It fetches the dev dependencies too: the build needs tsc and esbuild.
# deploy: 1. `pnpm install --offline --frozen-lockfile`: the workspace exactly as locked, from the store;
#         2. `pnpm build`: every package to JavaScript + declarations, each service bundled to dist/;
#         3. per service, `pnpm deploy --prod --offline` into <out-dir>/<service>: its production
#            dependencies as locked, the workspace packages copied in, no dev tooling. Deploy reads
#            the shared lockfile only when inject-workspace-packages is on; the workspace itself keeps
#            linking its packages (dev and tests read their sources), so the setting is given to the
#            deploy command alone. `pnpm deploy --legacy` would re-resolve every dependency instead,
#            which needs the registry's metadata: offline it fails (ERR_PNPM_NO_OFFLINE_META), online
#            the image no longer follows the lockfile.
#         4. what the runtime does not need is dropped from the tree: the TypeScript sources and tests
#            of the service and of the workspace packages copied in (the bundle inlines them; a
#            package keeps its package.json, by which the bundle finds its npm dependencies, and dist/).
# The store is PNPM_STORE_DIR (default: pnpm's own).
set -euo pipefail

store=()
if [ -n "${PNPM_STORE_DIR:-}" ]; then store=(--store-dir "$PNPM_STORE_DIR"); fi
# No prompts, no update checks (offline), no colours in logs.
export CI=true npm_config_update_notifier=false NO_COLOR=1

phase="${1:-}"
case "$phase" in
  fetch)
    pnpm fetch "${store[@]}"
    ;;
  deploy)
    out="${2:?usage: image-build.sh deploy <out-dir> <service>...}"
    shift 2
    [ "$#" -gt 0 ] || { echo "image-build.sh deploy: name at least one service (services/<name>)" >&2; exit 2; }
    pnpm install --offline --frozen-lockfile "${store[@]}"
    pnpm build
    mkdir -p "$out"
    out="$(cd "$out" && pwd)"
    for service in "$@"; do
      [ -f "services/$service/package.json" ] || { echo "no service services/$service" >&2; exit 2; }
      rm -rf "${out:?}/$service"
      pnpm --config.inject-workspace-packages=true --filter "@svc/$service" --prod --offline "${store[@]}" \
        deploy "$out/$service"
      rm -rf "$out/$service/src" "$out/$service/test" "$out/$service/tsconfig.build.json"
      for pkg in "$out/$service"/node_modules/.pnpm/@svc+*/node_modules/@svc/*/; do
        rm -rf "${pkg}src" "${pkg}test" "${pkg}tsconfig.build.json"
      done
      [ -f "$out/$service/dist/main.js" ] || { echo "services/$service: no dist/main.js after the build" >&2; exit 1; }
      echo "deployed @svc/$service to $out/$service"
    done
    ;;
  *)
    echo "usage: image-build.sh fetch | deploy <out-dir> <service>..." >&2
    exit 2
    ;;
esac
