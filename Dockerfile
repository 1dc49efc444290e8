# The image of either service: one template, the service and its ports given as build arguments
# (docker-compose.yml passes them). Build from the workspace root:
#   docker build --build-arg SERVICE=gateway --build-arg PORTS="3000 9101" \
#     --build-arg METRICS_PORT_VAR=GATEWAY_METRICS_PORT --build-arg METRICS_PORT=9101 -t svc-gateway .
#   docker build --build-arg SERVICE=dispatcher --build-arg PORTS=9102 \
#     --build-arg METRICS_PORT_VAR=DISPATCHER_METRICS_PORT --build-arg METRICS_PORT=9102 -t svc-dispatcher .
# The gateway's image also applies migrations (docker-compose.yml's `migrate` service overrides the
# command with `node dist/migrate.js`, the compiled `pnpm migrate`).

ARG NODE_IMAGE=node:24-slim

FROM ${NODE_IMAGE} AS build
ARG PNPM_VERSION=10.34.9
# The folder under services/ (its package is @svc/<SERVICE>).
ARG SERVICE
# npm rather than corepack: the version comes from package.json's packageManager either way, and
# npm needs no signature keys that an older corepack may lack.
RUN npm install -g "pnpm@${PNPM_VERSION}" --no-fund --no-audit --loglevel=error
WORKDIR /workspace
ENV PNPM_STORE_DIR=/pnpm/store
# scripts/image-build.sh holds every install, build and deploy step (test/infra/image-build.test.ts
# runs the same script). The lockfile alone decides what is fetched, so this layer (the store in it)
# is reused until pnpm-lock.yaml changes. Dev dependencies included: the build needs tsc and esbuild.
COPY pnpm-lock.yaml pnpm-workspace.yaml ./
# pnpm-workspace.yaml's patchedDependencies: `pnpm fetch` fails (ERR_PNPM_PATCH_NOT_FOUND) without them.
COPY patches ./patches
COPY scripts/image-build.sh scripts/
RUN scripts/image-build.sh fetch
COPY . .
# Offline from here: install from the store as locked, `pnpm build`, then deploy the service's
# production tree (dist/ + production node_modules, the workspace packages copied in) to /out/<SERVICE>.
RUN scripts/image-build.sh deploy /out ${SERVICE}

FROM ${NODE_IMAGE} AS runtime
ARG SERVICE
# Every port the service listens on (EXPOSE documents them).
ARG PORTS
# The variable the service reads its metrics port from, and that port's default: the health check
# follows the variable, so a port changed at run time is still the one checked.
ARG METRICS_PORT_VAR
ARG METRICS_PORT
# node's flags for the service, as package.json's start:prod passes them (docs/decisions/0007): a
# young generation of 4 MB a half and a cap on the old one, so the heap stays near what is live; the
# dispatcher's garbage collection on its main thread alone. On node's command line (CMD), not in
# NODE_OPTIONS, which refuses most V8 flags (--single-threaded-gc among them); overridable at run time.
ARG NODE_FLAGS=""
# METRICS_HOST: the metrics port on the container's interfaces, for Prometheus and the
# orchestrator's probes on the containers' network (outside an image it stays on loopback; never
# publish it).
ENV NODE_ENV=production \
    METRICS_HOST=0.0.0.0 \
    NODE_FLAGS=${NODE_FLAGS} \
    SVC_METRICS_PORT_VAR=${METRICS_PORT_VAR} \
    ${METRICS_PORT_VAR}=${METRICS_PORT}
WORKDIR /app
# Owned by root and read-only to the process: the service writes nothing to its own tree.
COPY --from=build /out/${SERVICE} ./
USER node
EXPOSE ${PORTS}
# Ready = Postgres and Redis answer (the metrics port's /readyz). No curl in the slim image: node's fetch.
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD ["node", "-e", "const e=process.env;fetch('http://127.0.0.1:'+e[e.SVC_METRICS_PORT_VAR]+'/readyz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# The compiled bundle (`pnpm build`), as the root `start:prod` script runs it: plain node with its
# flags, no tsx. The shell only expands NODE_FLAGS and `exec`s node, so node is PID 1's only child
# (compose's init): SIGTERM reaches it and the graceful stop runs.
CMD ["/bin/sh", "-c", "exec node $NODE_FLAGS dist/main.js"]
