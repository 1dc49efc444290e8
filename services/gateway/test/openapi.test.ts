import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import SwaggerParser from '@apidevtools/swagger-parser';
import express, { type Express } from 'express';
import request from 'supertest';
import YAML from 'yaml';
import {
  ERROR_STATUS,
  validateCreditos,
  validateEmpresaCreate,
  validateEmpresaPatch,
  validateGuiaBatch,
  validateGuiaCreate,
  validateGuiaEvento,
  validateListenAnswer,
  validateListenSessionCreate,
  validatePortalLinkRequest,
  validatePortalSessionRequest,
  validateRecoveryRequest,
  validateSecretRotation,
  validateSucursalCreate,
  validateWebhookCreate,
  validateWebhookPatch,
  type JsonSchema,
} from '@svc/contracts';
import type { Receiver } from '../../../test/support/https-receiver';
import { guia } from '../../../test/support/shipment-fixtures';
import {
  ADMIN_TOKEN,
  bearer,
  createBranch,
  createCompany,
  startGatewayFixture,
  type Company,
  type GatewayFixture,
  type TestGateway,
} from '../../../test/support/test-gateway';
import { requestId } from '../src/http/request-id.middleware';
import { errorMiddleware, notFound } from '../src/http/error.middleware';
import { INTERNAL_OPENAPI_PATH, internalOpenApiDocument, OPENAPI_PATH, openApiDocument, openApiRouter } from '../src/openapi/openapi.routes';
import { checkedAgent, ContractChecker, loadDocument, METHODS, sharedContractChecker, type Method, type OpenApi } from '../../../test/support/openapi-contract';

const ROOT = join(__dirname, '../../..');
const YAML_PATH = join(ROOT, 'openapi/openapi.yaml');

// ---- the routes an express app registers ----------------------------------------------------------

interface Layer {
  name: string;
  rawPath?: unknown;
  route?: { path: string; methods: Record<string, boolean> };
  handle: { stack?: Layer[] };
}

/** `METHOD /openapi/{path}` for every route of the app, nested routers included; the 405 catch-alls (`all`) aside. */
function registeredRoutes(stack: Layer[], prefix = ''): string[] {
  const out: string[] = [];
  for (const layer of stack) {
    if (layer.route) {
      const path = `${prefix}${layer.route.path}`.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
      for (const [m, on] of Object.entries(layer.route.methods)) if (on && m !== '_all') out.push(`${m.toUpperCase()} ${path}`);
    } else if (layer.name === 'router' && layer.handle.stack) {
      const mount = typeof layer.rawPath === 'string' && layer.rawPath !== '/' ? layer.rawPath : '';
      out.push(...registeredRoutes(layer.handle.stack, `${prefix}${mount}`));
    }
  }
  return out;
}

const stackOf = (app: unknown): Layer[] => (app as { router: { stack: Layer[] } }).router.stack;

/** Drops what only annotates (descriptions, examples, defaults): what remains is what validates. */
function validating(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(validating);
  if (schema === null || typeof schema !== 'object') return schema;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(schema)) {
    if (['description', 'examples', 'example', 'default', 'title'].includes(k)) continue;
    out[k] = k === 'properties' ? Object.fromEntries(Object.entries(v as object).map(([p, s]) => [p, validating(s)])) : validating(v);
  }
  return out;
}

describe('the OpenAPI document (openapi/openapi.yaml)', () => {
  let doc: OpenApi;

  beforeAll(async () => {
    doc = await loadDocument();
  });

  it('is a valid OpenAPI 3.1 document, as YAML and as each JSON document the gateway serves', async () => {
    const fromYaml = await SwaggerParser.validate(YAML_PATH);
    expect((fromYaml as { openapi?: string }).openapi).toBe('3.1.0');
    for (const served of [openApiDocument, internalOpenApiDocument]) {
      const fromJson = await SwaggerParser.validate(structuredClone(served) as never);
      expect((fromJson as { openapi?: string }).openapi).toBe('3.1.0');
    }
  });

  it('is served exactly as built from the YAML (run `node openapi/build.mjs` after editing it)', () => {
    const check = spawnSync(process.execPath, [join(ROOT, 'openapi/build.mjs'), '--check'], { encoding: 'utf8' });
    expect({ status: check.status, stderr: check.stderr }).toEqual({ status: 0, stderr: '' });
    // Every path of the YAML is in exactly one of the two documents.
    const yaml = YAML.parse(readFileSync(YAML_PATH, 'utf8'), { maxAliasCount: -1 }) as { paths: Record<string, unknown> };
    const served = [...Object.keys(openApiDocument.paths as object), ...Object.keys(internalOpenApiDocument.paths as object)];
    expect(served.sort()).toEqual(Object.keys(yaml.paths).sort());
  });

  it('the public document describes the public API only; the internal routes have their own', () => {
    const pub = JSON.stringify(openApiDocument);
    expect(Object.keys(openApiDocument.paths as object).filter((p) => p.startsWith('/internal'))).toEqual([]);
    expect(pub).not.toContain('adminToken');
    expect(pub).not.toContain('ADMIN_TOKEN');
    expect(pub).not.toMatch(/"\/internal\//);
    expect((openApiDocument.tags as Array<{ name: string }>).map((t) => t.name)).not.toContain('Internal');
    expect(Object.keys(openApiDocument).filter((k) => k.startsWith('x-'))).toEqual([]);
    const internal = internalOpenApiDocument as { paths: object; security: unknown; components: { securitySchemes: object } };
    expect(Object.keys(internal.paths).every((p) => p.startsWith('/internal/v1/'))).toBe(true);
    expect(Object.keys(internal.paths)).toContain(`/internal/v1${INTERNAL_OPENAPI_PATH}`);
    expect(internal.security).toEqual([{ adminToken: [] }]);
    expect(Object.keys(internal.components.securitySchemes)).toEqual(['adminToken']);
  });

  it('describes every request body with the very schema the gateway validates it with', () => {
    const bodies: Record<string, { schema: JsonSchema }> = {
      'POST /api/v1/guias': validateGuiaCreate,
      'POST /api/v1/guias/batch': validateGuiaBatch,
      'POST /api/v1/guias/{numeroGuia}/simular': validateGuiaEvento,
      'POST /api/v1/webhooks': validateWebhookCreate,
      'PATCH /api/v1/webhooks/{id}': validateWebhookPatch,
      'POST /api/v1/webhooks/{id}/secreto': validateSecretRotation,
      'POST /api/v1/webhooks/{id}/recuperar': validateRecoveryRequest,
      'POST /internal/v1/empresas': validateEmpresaCreate,
      'PATCH /internal/v1/empresas/{id}': validateEmpresaPatch,
      'POST /internal/v1/empresas/{id}/creditos': validateCreditos,
      'POST /internal/v1/empresas/{id}/sucursales': validateSucursalCreate,
      'POST /internal/v1/empresas/{id}/sucursales/{sid}/webhooks': validateWebhookCreate,
      'POST /internal/v1/guias/{numeroGuia}/eventos': validateGuiaEvento,
      'POST /internal/v1/empresas/{id}/portal': validatePortalLinkRequest,
      'POST /portal/v1/sesion': validatePortalSessionRequest,
      'POST /portal/v1/webhooks': validateWebhookCreate,
      'PATCH /portal/v1/webhooks/{id}': validateWebhookPatch,
      'POST /portal/v1/webhooks/{id}/secreto': validateSecretRotation,
      'POST /portal/v1/webhooks/{id}/recuperar': validateRecoveryRequest,
      'POST /portal/v1/sucursales/{sid}/webhooks': validateWebhookCreate,
      'POST /portal/v1/sandbox/guias/{numeroGuia}/simular': validateGuiaEvento,
      'POST /api/v1/escuchas': validateListenSessionCreate,
      'POST /api/v1/escuchas/{id}/respuestas': validateListenAnswer,
      'POST /api/v1/escuchas/{id}/respuestas/{intento}': validateListenAnswer,
    };
    const withBody: string[] = [];
    for (const [template, item] of Object.entries(doc.paths)) {
      for (const m of METHODS) {
        const op = item[m] as { requestBody?: { content: Record<string, { schema: unknown }> } } | undefined;
        if (!op?.requestBody) continue;
        const key = `${m.toUpperCase()} ${template}`;
        withBody.push(key);
        expect(Object.keys(op.requestBody.content)).toEqual(['application/json']);
        const documented = validating(op.requestBody.content['application/json']!.schema);
        const enforced = JSON.parse(JSON.stringify(bodies[key]?.schema ?? null)) as unknown;
        expect({ [key]: documented }).toEqual({ [key]: enforced });
      }
    }
    expect(withBody.sort()).toEqual(Object.keys(bodies).sort());
  });

  it('lists exactly the error codes of the catalog, each under its own status', () => {
    const schemas = doc.components.schemas;
    expect([...((schemas.ErrorCode as { enum: string[] }).enum)].sort()).toEqual(Object.keys(ERROR_STATUS).sort());
    const byStatus = new Map<number, string[]>();
    for (const [code, status] of Object.entries(ERROR_STATUS)) byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
    for (const [status, codes] of byStatus) {
      const schema = schemas[`Error${status}`] as { allOf: Array<{ properties?: { error?: { properties?: { code?: { enum?: string[] } } } } }> };
      expect({ status, codes: schema.allOf[1]!.properties!.error!.properties!.code!.enum!.slice().sort() }).toEqual({ status, codes: codes.sort() });
    }
  });
});

describe('the contract checker itself', () => {
  let checker: ContractChecker;
  const headers = { 'x-request-id': 'req-12345678', 'x-ratelimit-limit': '100', 'x-ratelimit-remaining': '99', 'x-ratelimit-reset': '1795462800', 'content-type': 'application/json; charset=utf-8' };
  const answer = (status: number, body: unknown, h: Record<string, string> = headers) => ({ status, headers: h, body, text: JSON.stringify(body) });
  const ok = { success: true, data: { id: '8a6e0804-2bd0-4672-b79d-d97027f9071a', activo: false } };

  beforeAll(async () => {
    checker = new ContractChecker(await loadDocument());
  });

  it('accepts a conforming answer', () => {
    expect(checker.problems('delete', '/api/v1/webhooks/8a6e0804-2bd0-4672-b79d-d97027f9071a', answer(200, ok))).toEqual([]);
  });

  it('refuses an answer that drifts: a field more, a header less, a code under another status, an undocumented status or path', () => {
    const path = '/api/v1/webhooks/8a6e0804-2bd0-4672-b79d-d97027f9071a';
    const one = (problems: string[]) => expect(problems).toHaveLength(1);
    one(checker.problems('delete', path, answer(200, { success: true, data: { ...ok.data, secret: 'x' } })));
    one(checker.problems('delete', path, answer(200, { success: true, data: { ...ok.data, activo: true } })));
    const { 'x-ratelimit-reset': _reset, ...noReset } = headers;
    one(checker.problems('delete', path, answer(200, ok, noReset)));
    one(checker.problems('delete', path, answer(200, ok, { ...headers, 'x-ratelimit-reset': 'soon' })));
    one(checker.problems('delete', path, answer(404, { success: false, error: { message: 'x', code: 'ALREADY_INACTIVE' } })));
    one(checker.problems('delete', path, answer(404, { success: false, error: { message: 'x' } })));
    one(checker.problems('delete', path, answer(402, { success: false, error: { message: 'x', code: 'PAYMENT_REQUIRED' } })));
    one(checker.problems('put', path, answer(200, ok)));
    one(checker.problems('get', '/api/v1/nothing', answer(200, ok)));
  });
});

describe("every gateway test's answers (test/support/test-gateway.ts checks them all)", () => {
  it("the fixture's agent rejects an answer that drifts from the document, and passes one that conforms", async () => {
    // A stand-in for the gateway that answers GET /api/v1/guias/{n}/tracking with a field the document does not have.
    let extra = true;
    const app = express();
    app.get('/api/v1/guias/:n/tracking', (_req, res) => {
      res.set({ 'X-Request-Id': 'req-12345678', 'X-RateLimit-Limit': '100', 'X-RateLimit-Remaining': '99', 'X-RateLimit-Reset': '1795462800' });
      res.status(404).json({ success: false, error: { message: 'not found', code: 'NOT_FOUND', ...(extra ? { stack: 'at x' } : {}) } });
    });
    const agent = checkedAgent(request(app), await sharedContractChecker());
    await expect(agent.get('/api/v1/guias/SVC-1/tracking').then((r) => r.status)).rejects.toThrow(/does not match openapi/);
    extra = false;
    expect((await agent.get('/api/v1/guias/SVC-1/tracking')).status).toBe(404);
    // A path the document does not have passes unchecked (a test probing an unknown route).
    expect((await agent.get('/api/v1/nothing-here')).status).toBe(404);
  });
});

describe('GET /openapi.json (the router)', () => {
  let app: Express;
  let checker: ContractChecker;

  beforeAll(async () => {
    checker = new ContractChecker(await loadDocument());
    // The gateway's own request id and error handling around the router, as app.ts mounts it.
    app = express();
    app.use(requestId);
    app.use(openApiRouter());
    app.use(notFound);
    app.use(errorMiddleware({ info: () => undefined, warn: () => undefined, error: () => undefined } as never));
  });

  it('serves the document without a token, with X-Request-Id, as the document itself says', async () => {
    const res = await checker.send(request(app), 'get', OPENAPI_PATH);
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.body).toEqual(openApiDocument);
  });

  it('answers another method with 405 and Allow: GET', async () => {
    const res = await request(app).post(OPENAPI_PATH);
    expect(res.status).toBe(405);
    expect(res.headers.allow).toBe('GET');
    expect(res.body).toEqual({ success: false, error: { code: 'METHOD_NOT_ALLOWED', message: expect.any(String) } });
  });

  it('registers only the documented path', () => {
    const app2 = express();
    app2.use(openApiRouter());
    expect(registeredRoutes(stackOf(app2))).toEqual([`GET ${OPENAPI_PATH}`]);
  });
});

describe('the gateway against its OpenAPI document', () => {
  let fx: GatewayFixture;
  let gw: TestGateway;
  let receiver: Receiver;
  let checker: ContractChecker;
  let c: Company;

  beforeAll(async () => {
    fx = await startGatewayFixture('openapi', {
      receiver: true,
      env: {
        RATE_LIMIT_PER_MINUTE: '100000',
        DISPATCH_HOST_MAP: 'receiver.test=127.0.0.1',
        DISPATCH_ALLOW_CIDRS: '127.0.0.0/8',
      },
    });
    gw = fx.gw;
    receiver = fx.receiver!;
    checker = new ContractChecker(await loadDocument());
    c = await createCompany(gw, { planActivo: true, creditos: 1000 });
  });
  afterAll(() => fx?.stop());

  type Opts = Parameters<ContractChecker['send']>[3];
  const api = (method: Method, path: string, token: string | undefined, opts: Opts = {}) =>
    checker.send(gw.http, method, `/api/v1${path}`, { ...opts, ...(token === undefined ? {} : { auth: bearer(token) }) });
  const admin = (method: Method, path: string, body?: unknown) =>
    checker.send(gw.http, method, `/internal/v1${path}`, { auth: bearer(ADMIN_TOKEN), body });

  it('registers exactly the documented routes: none undocumented, none documented and missing', () => {
    const app = gw.server.listeners('request')[0];
    // The document's own route is mounted by openApiRouter() (gateway.ts / app.ts mount it at the root).
    const own = express();
    own.use(openApiRouter());
    const registered = new Set([...registeredRoutes(stackOf(app)), ...registeredRoutes(stackOf(own))]);
    const documented = new Set(checker.documentedOperations());
    expect([...registered].filter((r) => !documented.has(r)).sort()).toEqual([]);
    expect([...documented].filter((r) => !registered.has(r)).sort()).toEqual([]);
    expect(documented.size).toBeGreaterThanOrEqual(29);
  });

  it('serves the document at GET /openapi.json without a token, once app.ts mounts openApiRouter()', async () => {
    const mounted = registeredRoutes(stackOf(gw.server.listeners('request')[0])).includes(`GET ${OPENAPI_PATH}`);
    if (!mounted) {
      process.stdout.write('openapi: app.ts does not mount openApiRouter() yet; GET /openapi.json checked on the router alone\n');
      return;
    }
    const res = await checker.send(gw.http, 'get', OPENAPI_PATH);
    expect(res.status).toBe(200);
    expect(res.body).toEqual(openApiDocument);
  });

  it('the internal routes: companies, credits, branches, tokens, branch webhooks, shipment events', async () => {
    const ownDocument = await admin('get', INTERNAL_OPENAPI_PATH);
    expect(ownDocument.status).toBe(200);
    expect(ownDocument.body).toEqual(internalOpenApiDocument);
    expect((await checker.send(gw.http, 'get', `/internal/v1${INTERNAL_OPENAPI_PATH}`, {})).status).toBe(401);
    const created = await admin('post', '/empresas', { nombre: 'Contrato S.A.', sucursalesHabilitadas: true, planActivo: true, creditos: 5 });
    expect(created.status).toBe(201);
    const id = created.body.data.id as string;
    expect((await admin('get', `/empresas/${id}`)).status).toBe(200);
    expect((await admin('post', `/empresas/${id}/tokens`)).status).toBe(409); // EMPRESA_NO_VERIFICADA
    expect((await admin('patch', `/empresas/${id}`, { verificada: true, limiteDiario: 50 })).status).toBe(200);
    expect((await admin('post', `/empresas/${id}/creditos`, { cantidad: 10 })).body.data).toEqual({ creditos: 15 });
    expect((await admin('post', `/empresas/${id}/tokens`)).status).toBe(201);
    const sucursal = await admin('post', `/empresas/${id}/sucursales`, { nombre: 'Zona 10' });
    expect(sucursal.status).toBe(201);
    const sid = sucursal.body.data.id as string;
    expect((await admin('post', `/empresas/${id}/sucursales/${sid}/tokens`)).status).toBe(201);
    expect((await admin('post', `/empresas/${id}/sucursales/${sid}/webhooks`, { url: 'https://receiver.test:8443/branch' })).status).toBe(201);
    expect((await admin('delete', `/empresas/${id}/sucursales/${sid}/tokens`)).body.data).toEqual({ eliminados: 2 });
    expect((await admin('delete', `/empresas/${id}/tokens`)).body.data).toEqual({ eliminados: 2 });
    // Errors of the internal routes.
    expect((await admin('post', '/empresas', { nombre: '' })).status).toBe(400);
    expect((await admin('get', '/empresas/00000000-0000-4000-8000-000000000000')).status).toBe(404);
    const other = await admin('post', '/empresas', { nombre: 'Sin sucursales' });
    expect((await admin('post', `/empresas/${other.body.data.id as string}/sucursales`, { nombre: 'X' })).status).toBe(409);
    expect((await checker.send(gw.http, 'get', `/internal/v1/empresas/${id}`, {})).status).toBe(401);
    expect((await checker.send(gw.http, 'post', '/internal/v1/empresas', { auth: bearer(ADMIN_TOKEN), raw: { type: 'text/plain', data: 'hola' } })).status).toBe(415);
    expect((await checker.send(gw.http, 'post', '/internal/v1/empresas', { auth: bearer(ADMIN_TOKEN), raw: { type: 'application/json', data: '{"nombre":' } })).status).toBe(400);
  });

  it('shipments: create (idempotent), batch, list, track, move on, simulate, and their errors', async () => {
    expect((await api('get', '/empresa', c.live)).body.data.modo).toBe('live');
    expect((await api('get', '/eventos', c.test)).body.data).toHaveLength(12);
    const one = await api('post', '/guias', c.live, { body: guia(1, { referencia: 'PED-1', observaciones: 'Frágil' }), headers: { 'Idempotency-Key': 'openapi-1' } });
    expect(one.status).toBe(201);
    const replay = await api('post', '/guias', c.live, { body: guia(1, { referencia: 'PED-1', observaciones: 'Frágil' }), headers: { 'Idempotency-Key': 'openapi-1' } });
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect((await api('post', '/guias', c.live, { body: guia(2), headers: { 'Idempotency-Key': 'openapi-1' } })).status).toBe(409);
    const batch = await api('post', '/guias/batch', c.live, { body: { guias: [guia(3), guia(4, { paquete: { peso: 2, largo: 10, ancho: 10, alto: 10 } })] } });
    expect(batch.status).toBe(201);
    const page = await api('get', '/guias?limit=2', c.live);
    expect(page.body.data.nextCursor).toEqual(expect.any(String));
    await api('get', `/guias?limit=2&cursor=${page.body.data.nextCursor as string}`, c.live);
    const numero = one.body.data.numeroGuia as string;
    for (const evento of ['GUIA_RECOLECTADA', 'GUIA_EN_BODEGA', 'GUIA_EN_RUTA']) expect((await admin('post', `/guias/${numero}/eventos`, { evento })).status).toBe(200);
    expect((await admin('post', `/guias/${numero}/eventos`, { evento: 'GUIA_DEVOLUCION', motivo: 'Dirección no encontrada' })).status).toBe(200);
    expect((await admin('post', `/guias/${numero}/eventos`, { evento: 'GUIA_RECOLECTADA' })).status).toBe(409);
    expect((await admin('post', '/guias/SVC0000000000/eventos', { evento: 'GUIA_RECOLECTADA' })).status).toBe(404);
    const tracked = await api('get', `/guias/${numero}/tracking`, c.live);
    expect(tracked.body.data.historial).toHaveLength(5);

    // The sandbox: a test token's shipment, moved on by simular.
    const sandbox = await api('post', '/guias', c.test, { body: guia(5) });
    const sn = sandbox.body.data.numeroGuia as string;
    expect((await api('post', `/guias/${sn}/simular`, c.test, { body: { evento: 'GUIA_ANULADA' } })).status).toBe(200);
    expect((await api('post', `/guias/${sn}/simular`, c.test, { body: { evento: 'GUIA_RECOLECTADA' } })).status).toBe(409);
    expect((await api('post', `/guias/${sn}/simular`, c.live, { body: { evento: 'GUIA_RECOLECTADA' } })).status).toBe(403);
    expect((await api('post', `/guias/${numero}/simular`, c.test, { body: { evento: 'GUIA_RECOLECTADA' } })).status).toBe(404);

    // Errors: validation, JSON, media type, size, auth, tracking of nothing, credits, daily limit.
    expect((await api('post', '/guias', c.live, { body: { destinatario: {}, paquete: { peso: -1 } } })).status).toBe(400);
    expect((await api('post', '/guias/batch', c.live, { body: { guias: [] } })).status).toBe(400);
    expect((await api('get', '/guias?limit=0', c.live)).status).toBe(400);
    expect((await api('post', '/guias', c.live, { raw: { type: 'application/json', data: '{"destinatario":' } })).status).toBe(400);
    expect((await api('post', '/guias', c.live, { raw: { type: 'text/plain', data: 'hola' } })).status).toBe(415);
    expect((await api('post', '/guias', c.live, { raw: { type: 'application/json', data: `"${'x'.repeat(1024 * 1024 + 10)}"` } })).status).toBe(413);
    expect((await api('get', '/guias', undefined)).status).toBe(401);
    expect((await api('get', '/guias', 'svc_live_unknown-token-of-nobody-at-all-0123456789')).status).toBe(401);
    expect((await checker.send(gw.http, 'get', '/api/v1/empresa', { auth: 'Basic dXNlcjpwYXNz' })).status).toBe(401);
    expect((await api('get', '/guias/SVC0000000000/tracking', c.live)).status).toBe(404);
    const broke = await createCompany(gw);
    expect((await api('post', '/guias', broke.live, { body: guia(6) })).status).toBe(402);
    expect((await api('post', '/guias/batch', broke.live, { body: { guias: [guia(7)] } })).status).toBe(402);
    const capped = await createCompany(gw, { planActivo: true, creditos: 10, limiteDiario: 1 });
    expect((await api('post', '/guias/batch', capped.live, { body: { guias: [guia(8), guia(9)] } })).status).toBe(429);
  });

  it('webhooks: create, list, detail, update, reactivate, PING, rotate, delete, and their errors', async () => {
    receiver.respond('/contract', { status: 200 });
    const created = await api('post', '/webhooks', c.live, { body: { url: receiver.url('/contract'), eventos: ['GUIA_CREADA'], descripcion: 'ERP' } });
    expect(created.status).toBe(201);
    const id = created.body.data.id as string;
    expect((await api('get', '/webhooks', c.live)).status).toBe(200);
    expect((await api('post', `/webhooks/${id}/test`, c.live)).body.data.exitoso).toBe(true);
    // What the receiver got is the documented delivery: payload and headers.
    const received = receiver.requestsTo('/contract');
    expect(received).toHaveLength(1);
    const delivery = checker.doc.webhooks!.evento!.post!;
    expect(checker.validate(delivery.requestBody.content['application/json']!.schema, JSON.parse(received[0]!.rawBody.toString('utf8')))).toBeUndefined();
    for (const p of delivery.parameters ?? []) {
      const value = received[0]!.headers[p.name.toLowerCase()] as string | undefined;
      if (value === undefined) expect({ header: p.name, required: p.required ?? false }).toEqual({ header: p.name, required: false });
      else expect({ header: p.name, problem: checker.validate(p.schema, value) }).toEqual({ header: p.name, problem: undefined });
    }
    const detail = await api('get', `/webhooks/${id}`, c.live);
    expect(detail.body.data.entregas).toHaveLength(1);
    expect((await api('get', '/webhooks', c.live)).body.data[0].ultimoDelivery).not.toBeNull();
    expect((await api('patch', `/webhooks/${id}`, c.live, { body: { descripcion: null, eventos: [] } })).status).toBe(200);
    expect((await api('post', `/webhooks/${id}/secreto`, c.live, { body: { solaparHoras: 1 } })).body.data.secretoAnteriorExpiraEn).toEqual(expect.any(String));
    expect((await api('post', `/webhooks/${id}/secreto`, c.live)).status).toBe(200);
    expect((await api('post', `/webhooks/${id}/secreto`, c.live, { body: { solaparHoras: 0 } })).body.data.secretoAnteriorExpiraEn).toBeNull();
    expect((await api('delete', `/webhooks/${id}`, c.live)).body.data).toEqual({ id, activo: false });
    expect((await api('delete', `/webhooks/${id}`, c.live)).status).toBe(409);
    expect((await api('post', `/webhooks/${id}/test`, c.live)).status).toBe(409);
    expect((await api('patch', `/webhooks/${id}`, c.live, { body: { activo: true } })).body.data.activo).toBe(true);
    // Errors.
    expect((await api('post', '/webhooks', c.live, { body: { url: 'http://example.com/hook' } })).status).toBe(400);
    expect((await api('post', '/webhooks', c.live, { body: { url: 'https://example.com/hook', extra: 1 } })).status).toBe(400);
    expect((await api('patch', `/webhooks/${id}`, c.live, { body: {} })).status).toBe(400);
    expect((await api('get', '/webhooks/00000000-0000-4000-8000-000000000000', c.live)).status).toBe(404);
    expect((await api('get', `/webhooks/${id}`, c.test)).status).toBe(404); // another mode's
    const head = await createCompany(gw, { sucursalesHabilitadas: true });
    const branch = await createBranch(gw, head.id);
    expect((await api('post', '/webhooks', branch.live, { body: { url: 'https://example.com/hook' } })).status).toBe(403);
    expect((await api('get', '/webhooks', branch.live)).status).toBe(200);
    // The limit of 10 active webhooks (the test mode's, apart from the live one's).
    for (let i = 0; i < 10; i++) await api('post', '/webhooks', head.test, { body: { url: `https://example.com/hook/${i}` } });
    expect((await api('post', '/webhooks', head.test, { body: { url: 'https://example.com/hook/11' } })).status).toBe(400);
  });

  it('the delivery log, resending and recovery, and their errors', async () => {
    receiver.respond('/log-fails', { status: 500, body: 'no' });
    const id = (await api('post', '/webhooks', c.live, { body: { url: receiver.url('/log-fails') } })).body.data.id as string;
    expect((await api('post', `/webhooks/${id}/test`, c.live)).body.data).toEqual(expect.objectContaining({ exitoso: false, statusCode: 500 }));
    const log = await api('get', `/webhooks/${id}/entregas?limit=10&estado=fallida&evento=PING&exitoso=false`, c.live);
    expect(log.body.data.entregas).toHaveLength(1);
    const entrega = log.body.data.entregas[0] as { id: string; intentosDetalle: unknown[] };
    expect(entrega.intentosDetalle).toHaveLength(1);
    expect((await api('get', `/webhooks/${id}/entregas/${entrega.id}`, c.live)).status).toBe(200);
    const resent = await api('post', `/webhooks/${id}/entregas/${entrega.id}/reenviar`, c.live);
    expect(resent.status).toBe(202);
    expect(resent.body.data.reenvioDe).toBe(entrega.id);
    // The resend is pending (no dispatcher runs here): resending it is refused.
    expect((await api('post', `/webhooks/${id}/entregas/${resent.body.data.id as string}/reenviar`, c.live)).status).toBe(409);
    const desde = new Date(Date.now() - 3600_000).toISOString();
    expect((await api('post', `/webhooks/${id}/recuperar`, c.live, { body: { desde } })).body.data).toEqual({ reenviadas: 0, pendientes: 0 });
    await api('post', `/webhooks/${id}/test`, c.live);
    expect((await api('post', `/webhooks/${id}/recuperar`, c.live, { body: { desde, hasta: new Date(Date.now() + 60_000).toISOString() } })).body.data).toEqual({ reenviadas: 1, pendientes: 0 });
    // Its health, and the replay of what it missed (nothing: it was never inactive).
    expect((await api('get', `/webhooks/${id}/salud`, c.live)).body.data).toMatchObject({ estado: 'saludable', desactivacion: null });
    expect((await api('post', `/webhooks/${id}/recuperar`, c.live, { body: { desde, omitidas: true } })).body.data).toEqual({ reenviadas: 0, pendientes: 0, omitidas: 0 });
    expect((await api('get', `/webhooks/00000000-0000-4000-8000-000000000000/salud`, c.live)).status).toBe(404);
    // Errors.
    expect((await api('get', `/webhooks/${id}/entregas?estado=perdida`, c.live)).status).toBe(400);
    expect((await api('get', `/webhooks/${id}/entregas/no-such-delivery`, c.live)).status).toBe(404);
    expect((await api('post', `/webhooks/${id}/recuperar`, c.live, { body: { desde: 'ayer' } })).status).toBe(400);
    expect((await api('post', `/webhooks/${id}/secreto`, c.live, { body: { solaparHoras: 100 } })).status).toBe(400);
    await api('delete', `/webhooks/${id}`, c.live);
    expect((await api('post', `/webhooks/${id}/recuperar`, c.live, { body: { desde } })).status).toBe(409);
    expect((await api('post', `/webhooks/${id}/entregas/${entrega.id}/reenviar`, c.live)).status).toBe(409);
    const head = await createCompany(gw, { sucursalesHabilitadas: true });
    const branch = await createBranch(gw, head.id);
    expect((await api('post', `/webhooks/${id}/entregas/${entrega.id}/reenviar`, branch.live)).status).toBe(403);
  });

  it('the customer portal: a link, its session, every operation of its pages, and their errors', async () => {
    const company = await admin('post', '/empresas', { nombre: 'Portal S.A.', verificada: true, sucursalesHabilitadas: true, planActivo: true, creditos: 10 });
    const id = company.body.data.id as string;
    const link = await admin('post', `/empresas/${id}/portal`, { usuario: 'ana@portal.gt' });
    expect(link.status).toBe(201);
    expect((await admin('post', `/empresas/${id}/portal`, { usuario: '' })).status).toBe(400);
    expect((await admin('post', '/empresas/00000000-0000-4000-8000-000000000000/portal', { usuario: 'x' })).status).toBe(404);
    const secret = new URL(link.body.data.url as string).hash.slice(1);
    const started = await checker.send(gw.http, 'post', '/portal/v1/sesion', { body: { enlace: secret } });
    expect(started.status).toBe(201);
    expect((await checker.send(gw.http, 'post', '/portal/v1/sesion', { body: { enlace: secret } })).status).toBe(401); // used
    expect((await checker.send(gw.http, 'post', '/portal/v1/sesion', { body: {} })).status).toBe(400);
    expect((await checker.send(gw.http, 'post', '/portal/v1/sesion', { raw: { type: 'text/plain', data: 'x' } })).status).toBe(415);
    const cookie = String(([] as string[]).concat(started.headers['set-cookie'] ?? [])[0]).split(';')[0]!;
    const csrf = started.body.data.csrfToken as string;
    type PortalOpts = { body?: unknown; csrf?: boolean };
    const portal = (method: Method, path: string, opts: PortalOpts = {}) =>
      checker.send(gw.http, method, `/portal/v1${path}`, {
        headers: { Cookie: cookie, ...(opts.csrf === false || method === 'get' ? {} : { 'X-CSRF-Token': csrf }) },
        body: opts.body,
      });

    expect((await portal('get', '/sesion')).status).toBe(200);
    expect((await portal('get', '/resumen')).body.data.entregas.porHora.live).toHaveLength(24);
    expect((await portal('get', '/tokens')).body.data).toEqual({ generadosEn: null, verificada: true });
    expect((await portal('post', '/tokens', { csrf: false })).status).toBe(403);
    expect((await portal('post', '/tokens')).status).toBe(201);
    expect((await portal('delete', '/tokens')).body.data).toEqual({ eliminados: 2 });
    receiver.respond('/portal-contract', { status: 200 });
    const created = await portal('post', '/webhooks?modo=live', { body: { url: receiver.url('/portal-contract'), descripcion: 'Portal' } });
    expect(created.status).toBe(201);
    const wid = created.body.data.id as string;
    expect((await portal('post', '/webhooks', { body: { url: 'http://example.com/x' } })).status).toBe(400);
    expect((await portal('get', '/webhooks?modo=live')).body.data).toHaveLength(1);
    expect((await portal('get', '/webhooks?modo=nada')).status).toBe(400);
    expect((await portal('get', `/webhooks/${wid}?modo=live`)).status).toBe(200);
    expect((await portal('get', `/webhooks/${wid}?modo=test`)).status).toBe(404);
    expect((await portal('post', `/webhooks/${wid}/test?modo=live`)).body.data.exitoso).toBe(true);
    expect((await portal('patch', `/webhooks/${wid}?modo=live`, { body: { descripcion: 'Editado' } })).status).toBe(200);
    expect((await portal('post', `/webhooks/${wid}/secreto?modo=live`, { body: { solaparHoras: 1 } })).status).toBe(200);
    const log = await portal('get', `/webhooks/${wid}/entregas?modo=live&limit=5`);
    const eid = log.body.data.entregas[0].id as string;
    expect((await portal('get', `/webhooks/${wid}/entregas/${eid}?modo=live`)).status).toBe(200);
    expect((await portal('post', `/webhooks/${wid}/entregas/${eid}/reenviar?modo=live`)).status).toBe(202);
    expect((await portal('post', `/webhooks/${wid}/recuperar?modo=live`, { body: { desde: new Date(Date.now() - 3600_000).toISOString() } })).status).toBe(202);
    expect((await portal('get', `/webhooks/${wid}/salud?modo=live`)).status).toBe(200);
    expect((await portal('delete', `/webhooks/${wid}?modo=live`)).body.data).toEqual({ id: wid, activo: false });
    expect((await portal('delete', `/webhooks/${wid}?modo=live`)).status).toBe(409);
    expect((await portal('patch', `/webhooks/${wid}?modo=live`, { body: { activo: true } })).body.data.activo).toBe(true);

    const sucursal = await admin('post', `/empresas/${id}/sucursales`, { nombre: 'Zona 4' });
    const sid = sucursal.body.data.id as string;
    expect((await portal('post', `/sucursales/${sid}/tokens`)).status).toBe(201);
    expect((await portal('post', `/sucursales/${sid}/webhooks`, { body: { url: 'https://receiver.test:8443/branch' } })).status).toBe(201);
    expect((await portal('get', '/sucursales')).body.data[0].webhooks).toHaveLength(1);
    expect((await portal('delete', `/sucursales/${sid}/tokens`)).body.data).toEqual({ eliminados: 2 });
    expect((await portal('post', '/sucursales/00000000-0000-4000-8000-000000000000/tokens')).status).toBe(404);

    const guia = await portal('post', '/sandbox/guias');
    expect(guia.status).toBe(201);
    const numero = guia.body.data.numeroGuia as string;
    expect((await portal('get', '/sandbox/guias')).body.data.guias).toHaveLength(1);
    expect((await portal('post', `/sandbox/guias/${numero}/simular`, { body: { evento: 'GUIA_RECOLECTADA' } })).status).toBe(200);
    expect((await portal('post', `/sandbox/guias/${numero}/simular`, { body: { evento: 'GUIA_RECOLECTADA' } })).status).toBe(409);
    expect((await portal('get', `/sandbox/guias/${numero}`)).body.data.eventosPermitidos).toContain('GUIA_EN_BODEGA');
    expect((await portal('get', '/sandbox/guias/SVC0000000000')).status).toBe(404);

    // Actividad: what the walk above did, newest first, a page at a time.
    const actividad = await portal('get', '/actividad?limit=2');
    expect(actividad.body.data.actividades.map((a: { accion: string }) => a.accion)).toEqual(['tokens.deleted', 'webhook.created']);
    expect((await portal('get', `/actividad?cursor=${actividad.body.data.nextCursor as string}`)).status).toBe(200);
    expect((await portal('get', '/actividad?cursor=nada')).status).toBe(400);

    // Sesiones de escucha: none, then the one a test token opened.
    expect((await portal('get', '/sandbox/escuchas')).body.data).toEqual([]);
    const pair = await portal('post', '/tokens');
    const escucha = await gw.http.post('/api/v1/escuchas').set('Authorization', bearer(pair.body.data.test as string)).send({ destino: 'http://localhost:4000/hook' });
    expect(escucha.status).toBe(201);
    expect((await portal('get', '/sandbox/escuchas')).body.data).toEqual([expect.objectContaining({ id: escucha.body.data.id, destino: 'http://localhost:4000/hook', entregas: [] })]);

    // Another company's resources are not found; a company without branches has no Sucursales.
    const other = await admin('post', '/empresas', { nombre: 'Otra S.A.' });
    const otherLink = await admin('post', `/empresas/${other.body.data.id as string}/portal`, { usuario: 'otro' });
    const otherStarted = await checker.send(gw.http, 'post', '/portal/v1/sesion', { body: { enlace: new URL(otherLink.body.data.url as string).hash.slice(1) } });
    const otherCookie = String(([] as string[]).concat(otherStarted.headers['set-cookie'] ?? [])[0]).split(';')[0]!;
    expect((await checker.send(gw.http, 'get', `/portal/v1/webhooks/${wid}`, { headers: { Cookie: otherCookie } })).status).toBe(404);
    expect((await checker.send(gw.http, 'get', '/portal/v1/sucursales', { headers: { Cookie: otherCookie } })).status).toBe(409);
    expect((await checker.send(gw.http, 'post', '/portal/v1/tokens', { headers: { Cookie: otherCookie, 'X-CSRF-Token': otherStarted.body.data.csrfToken as string } })).status).toBe(409);

    // The end of a session: the operator's, then Cerrar sesión.
    expect((await admin('delete', `/empresas/${other.body.data.id as string}/portal`)).body.data).toEqual({ sesionesTerminadas: 1 });
    expect((await checker.send(gw.http, 'get', '/portal/v1/sesion', { headers: { Cookie: otherCookie } })).status).toBe(401);
    expect((await portal('delete', '/sesion')).body.data).toEqual({ cerrada: true });
    expect((await portal('get', '/resumen')).status).toBe(401);
  });

  it('the rate limit: three headers on every answer, and 429 RATE_LIMIT_EXCEEDED with Retry-After', async () => {
    const limited = await fx.addGateway({ env: { RATE_LIMIT_PER_MINUTE: '2' } });
    const k = await createCompany(gw);
    const call = () => checker.send(limited.http, 'get', '/api/v1/empresa', { auth: bearer(k.live) });
    expect((await call()).status).toBe(200);
    expect((await call()).status).toBe(200);
    const refused = await call();
    expect(refused.status).toBe(429);
    expect(Number(refused.headers['x-ratelimit-reset'])).toBeGreaterThan(Date.now() / 1000 - 1);
    expect(Number(refused.headers['x-ratelimit-reset'])).toBeLessThan(Date.now() / 1000 + 120);
  });

  it('listening sessions: open, list, answer, close, the stream of an ended one, and their errors', async () => {
    const k = await createCompany(gw);
    const opened = await checker.send(gw.http, 'post', '/api/v1/escuchas', { auth: bearer(k.test), body: { eventos: ['GUIA_CREADA'], destino: 'http://localhost:4000/hook' } });
    expect(opened.status).toBe(201);
    const sid = opened.body.data.id as string;
    expect((await checker.send(gw.http, 'post', '/api/v1/escuchas', { auth: bearer(k.live), body: {} })).status).toBe(403);
    expect((await checker.send(gw.http, 'get', '/api/v1/escuchas', { auth: bearer(k.test) })).body.data.map((x: { id: string }) => x.id)).toEqual([sid]);
    const answered = await checker.send(gw.http, 'post', `/api/v1/escuchas/${sid}/respuestas`, { auth: bearer(k.test), body: { intento: 'nadie.nada', statusCode: 200, duracionMs: 3 } });
    expect(answered.body.data).toEqual({ intento: 'nadie.nada' });
    expect((await checker.send(gw.http, 'post', `/api/v1/escuchas/${sid}/respuestas`, { auth: bearer(k.test), body: { intento: 'x' } })).status).toBe(400);
    // The attempt in the path (svc listen's form): an attempt no dispatcher waits for is counted and passed on as the first form's.
    const byPath = await checker.send(gw.http, 'post', `/api/v1/escuchas/${sid}/respuestas/nadie.nada`, { auth: bearer(k.test), body: { intento: 'nadie.nada', statusCode: 200, duracionMs: 3 } });
    expect(byPath.body.data).toEqual({ intento: 'nadie.nada' });
    const mismatched = await checker.send(gw.http, 'post', `/api/v1/escuchas/${sid}/respuestas/otro.intento`, { auth: bearer(k.test), body: { intento: 'nadie.nada', statusCode: 200, duracionMs: 3 } });
    expect(mismatched.status).toBe(400);
    expect((await checker.send(gw.http, 'delete', `/api/v1/escuchas/${sid}`, { auth: bearer(k.test) })).body.data.activo).toBe(false);
    expect((await checker.send(gw.http, 'delete', `/api/v1/escuchas/${sid}`, { auth: bearer(k.test) })).status).toBe(404);
    expect((await checker.send(gw.http, 'get', `/api/v1/escuchas/${sid}/stream`, { auth: bearer(k.test) })).status).toBe(404);
  });

  it('exercised every documented operation (runs last)', () => {
    // Every documented operation was answered at least once, and most documented answers were seen.
    const seenOps = new Set(checker.calls.map((x) => `${x.method.toUpperCase()} ${x.template}`));
    const seen = new Set(checker.calls.map((x) => `${x.method.toUpperCase()} ${x.template} ${x.status}`));
    const documented = checker.documentedResponses();
    const ops = checker.documentedOperations().filter((o) => o !== `GET ${OPENAPI_PATH}`);
    process.stdout.write(
      `openapi: ${checker.calls.length} answers validated; ${ops.filter((o) => seenOps.has(o)).length}/${ops.length} operations, ` +
        `${documented.filter((d) => seen.has(d)).length}/${documented.length} documented (operation, status) pairs seen\n`,
    );
    expect(ops.filter((o) => !seenOps.has(o))).toEqual([]);
  });
});
