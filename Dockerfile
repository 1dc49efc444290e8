# The image of either service: one template, the service and its ports given as build arguments
# (docker-compose.yml passes them). Build from the workspace root:
#   docker build --build-arg SERVICE=gateway --build-arg PORTS="3000 9101" \
#     --build-arg METRICS_PORT_VAR=GATEWAY_METRICS_PORT --build-arg METRICS_PORT=9101 -t svc-gateway .
#   docker build --build-arg SERVICE=dispatcher --build-arg PORTS=9102 \
#     --build-arg METRICS_PORT_VAR=DISPATCHER_METRICS_PORT --build-arg METRICS_PORT=9102 -t svc-dispatcher .
# The gateway's image also applies migrations (docker-compose.yml's `migrate` service overrides the command).

ARG NODE_IMAGE=node:20-slim

FROM ${NODE_IMAGE} AS build
ARG PNPM_VERSION=10.34.9
# The folder under services/ (its package is @svc/<SERVICE>).
ARG SERVICE
# npm rather than corepack: the version comes from package.json's packageManager either way, and
# npm needs no signature keys that an older corepack may lack.
RUN npm install -g "pnpm@${PNPM_VERSION}" --no-fund --no-audit --loglevel=error
WORKDIR /workspace
# The lockfile alone decides what is fetched, so this layer (the store in it) is reused until
# pnpm-lock.yaml changes, and the deploy below can run offline. The build stage is discarded.
COPY pnpm-lock.yaml pnpm-workspace.yaml ./
RUN pnpm fetch --prod --store-dir /pnpm/store
COPY . .
# A self-contained tree: the service's own files plus its production dependencies, the workspace
# packages (@svc/schema, @svc/observability...) copied in as real directories. No dev tooling.
# --legacy: the workspace links its packages instead of injecting them (pnpm 10's default deploy
# needs inject-workspace-packages).
RUN pnpm --filter @svc/${SERVICE} --prod deploy --legacy --offline --store-dir /pnpm/store /out

FROM ${NODE_IMAGE} AS runtime
# Every port the service listens on (EXPOSE documents them).
ARG PORTS
# The variable the service reads its metrics port from, and that port's default: the health check
# follows the variable, so a port changed at run time is still the one checked.
ARG METRICS_PORT_VAR
ARG METRICS_PORT
ENV NODE_ENV=production \
    SVC_METRICS_PORT_VAR=${METRICS_PORT_VAR} \
    ${METRICS_PORT_VAR}=${METRICS_PORT}
WORKDIR /app
# Owned by root and read-only to the process: the service writes nothing to its own tree.
COPY --from=build /out ./
USER node
EXPOSE ${PORTS}
# Ready = Postgres and Redis answer (the metrics port's /readyz). No curl in the slim image: node's fetch.
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD ["node", "-e", "const e=process.env;fetch('http://127.0.0.1:'+e[e.SVC_METRICS_PORT_VAR]+'/readyz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# `pnpm start` runs `tsx src/main.ts`; here the tsx loader runs in the one node process, so SIGTERM
# reaches main.ts directly and the graceful stop runs (no wrapper process in between).
CMD ["node", "--import", "tsx", "src/main.ts"]
