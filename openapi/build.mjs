/* global console, process */
// Writes the two JSON documents of openapi/openapi.yaml where the gateway serves them from
// (services/gateway/src/openapi/: imported, so tsc, tsx, jest and the esbuild bundle all carry them
// without reading a file at run time):
//
//   openapi.json           the public API: every path but /internal/..., served at GET /openapi.json
//   internal-openapi.json  the operator's internal routes, served behind the admin token at
//                          GET /internal/v1/openapi.json (on ADMIN_PORT when that is set)
//
// The internal document carries the components its paths reach; the public one drops those only the
// internal routes use, so it names nothing of the operator's door. The public one's `webhooks` section
// and event schemas come from the event catalog (packages/contracts/src/event-catalog.ts, loaded
// through tsx), so that they are the very schemas GET /api/v1/eventos serves. Run after editing the
// YAML or the catalog:
//
//   node openapi/build.mjs           # writes both
//   node openapi/build.mjs --check   # exits 1 if either differs from what the YAML builds
//
// services/gateway/test/openapi.test.ts runs the check.
import { readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { tsImport } from 'tsx/esm/api';
import YAML from 'yaml';

const here = import.meta.dirname;
const source = resolve(here, 'openapi.yaml');
const targets = {
  public: resolve(here, '../services/gateway/src/openapi/openapi.json'),
  internal: resolve(here, '../services/gateway/src/openapi/internal-openapi.json'),
};

const catalog = await tsImport('../packages/contracts/src/event-catalog.ts', import.meta.url);

const INTERNAL_PREFIX = '/internal/';
const INTERNAL_TAG = 'Internal';
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

/** Every `#/components/<section>/<name>` reachable from `roots`, following refs inside components too. */
function reachable(components, roots) {
  const seen = new Set();
  const walk = (node) => {
    if (Array.isArray(node)) return node.forEach(walk);
    if (node === null || typeof node !== 'object') return;
    for (const [k, v] of Object.entries(node)) {
      if (k === '$ref' && typeof v === 'string' && v.startsWith('#/components/') && !seen.has(v)) {
        seen.add(v);
        const [section, name] = v.slice('#/components/'.length).split('/');
        walk(components[section]?.[name]);
      } else walk(v);
    }
  };
  walk(roots);
  return seen;
}

/** The security schemes a document's own requirements name (top level and per operation). */
function schemesUsed(doc) {
  const names = new Set();
  const add = (requirements) => (requirements ?? []).forEach((r) => Object.keys(r).forEach((n) => names.add(n)));
  add(doc.security);
  for (const item of [...Object.values(doc.paths ?? {}), ...Object.values(doc.webhooks ?? {})]) {
    for (const m of METHODS) if (item[m]) add(item[m].security);
  }
  return names;
}

/**
 * `doc` with the components it may carry: `keep(ref)` decides for each (`#/components/<section>/<name>`);
 * security schemes are those its requirements name. Sections stay in their order.
 */
function withComponents(doc, components, keep) {
  const schemes = schemesUsed(doc);
  const out = {};
  for (const [section, entries] of Object.entries(components)) {
    const kept = Object.fromEntries(
      Object.entries(entries).filter(([name]) => (section === 'securitySchemes' ? schemes.has(name) : keep(`#/components/${section}/${name}`))),
    );
    if (Object.keys(kept).length > 0) out[section] = kept;
  }
  return { ...doc, components: out };
}

/** `GUIA_EN_BODEGA` → `EventoGuiaEnBodega`: the component name of an event's body. */
export const eventComponent = (evento) =>
  `Evento${evento
    .toLowerCase()
    .split('_')
    .map((w) => w.charAt(0).toUpperCase() + w.slice(1))
    .join('')}`;

/**
 * The event catalog's part of the public document: a schema per event and their union `EventPayload`,
 * and a `webhooks` entry per event (plus `evento`, a delivery of any event), each with the delivery's
 * headers and what `x-webhook-delivery` says of every delivery.
 */
function eventParts(delivery) {
  const schemas = {};
  for (const e of catalog.EVENT_CATALOG) schemas[eventComponent(e.evento)] = e.schema;
  const refOf = (evento) => ({ $ref: `#/components/schemas/${eventComponent(evento)}` });
  schemas.EventPayload = { description: 'The body of any delivery: one of the events, told apart by `event`.', oneOf: catalog.EVENT_CATALOG.map((e) => refOf(e.evento)) };
  const entry = (summary, evento, schema, examples) => ({
    post: {
      summary,
      description: delivery.description,
      security: [],
      parameters: catalog.deliveryHeaders(evento).map((h) => ({ name: h.name, in: 'header', required: h.required, schema: h.schema, description: h.description })),
      requestBody: { required: true, content: { 'application/json': { schema, examples } } },
      responses: delivery.responses,
    },
  });
  const example = (evento) => ({ value: catalog.EVENT_CATALOG.find((e) => e.evento === evento).ejemplo });
  const webhooks = { evento: entry(`${delivery.summary} (any event)`, undefined, { $ref: '#/components/schemas/EventPayload' }, { entregada: example('GUIA_ENTREGADA'), ping: example('PING') }) };
  for (const e of catalog.EVENT_CATALOG) webhooks[e.evento] = entry(`${e.evento}: ${e.descripcion}`, e.evento, refOf(e.evento), { ejemplo: { value: e.ejemplo } });
  return { schemas, webhooks };
}

/** The YAML's two documents: `x-` keys at the top are the source's own, never served. */
export function buildDocuments(yamlText) {
  // Aliases expand to plain objects: the JSON holds no anchors, and no YAML-only construct is used.
  const source = YAML.parse(yamlText, { maxAliasCount: -1 });
  const { components: written, paths, tags, ...top } = source;
  const events = eventParts(source['x-webhook-delivery']);
  const clash = Object.keys(events.schemas).filter((name) => name in written.schemas);
  if (clash.length > 0) throw new Error(`openapi.yaml defines ${clash.join(', ')}, which the event catalog writes`);
  const components = { ...written, schemas: { ...written.schemas, ...events.schemas } };
  const { webhooks } = events;
  const internalOnly = source['x-internal-document'];
  for (const key of Object.keys(top)) if (key.startsWith('x-')) delete top[key];
  const split = (internal) => Object.fromEntries(Object.entries(paths).filter(([p]) => p.startsWith(INTERNAL_PREFIX) === internal));

  const publicPaths = { paths: split(false), webhooks };
  const internalPaths = { paths: split(true) };
  const publicRefs = reachable(components, publicPaths);
  const internalRefs = reachable(components, internalPaths);
  // The public document keeps what no path names (the 405 envelope, say: it documents the catalog)
  // and drops only what the internal routes alone use; the internal one carries what its paths reach.
  const publicDoc = withComponents({ ...top, tags: tags.filter((t) => t.name !== INTERNAL_TAG), ...publicPaths }, components, (ref) => publicRefs.has(ref) || !internalRefs.has(ref));
  const internalDoc = withComponents(
    {
      openapi: top.openapi,
      jsonSchemaDialect: top.jsonSchemaDialect,
      info: { ...internalOnly.info, license: top.info.license },
      servers: internalOnly.servers,
      tags: tags.filter((t) => t.name === INTERNAL_TAG),
      security: [{ adminToken: [] }],
      ...internalPaths,
    },
    components,
    (ref) => internalRefs.has(ref),
  );
  return { public: publicDoc, internal: internalDoc };
}

const isMain = process.argv[1] && resolve(process.argv[1]) === resolve(here, 'build.mjs');
if (isMain) {
  const built = buildDocuments(readFileSync(source, 'utf8'));
  if (process.argv.includes('--check')) {
    const stale = Object.entries(targets).filter(([which, path]) => !isDeepStrictEqual(JSON.parse(readFileSync(path, 'utf8')), built[which]));
    for (const [, path] of stale) console.error(`${path} differs from openapi/openapi.yaml: run node openapi/build.mjs`);
    process.exit(stale.length === 0 ? 0 : 1);
  }
  for (const [which, path] of Object.entries(targets)) {
    writeFileSync(path, `${JSON.stringify(built[which], null, 2)}\n`);
    console.log(`wrote ${path}`);
  }
}
