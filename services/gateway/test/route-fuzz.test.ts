import request from 'supertest';
import { internalOpenApiDocument, openApiDocument } from '../src/openapi/openapi.routes';
import { guia } from '../../../test/support/shipment-fixtures';
import { ADMIN_TOKEN, bearer, createCompany, startGatewayFixture, type Company, type GatewayFixture } from '../../../test/support/test-gateway';
import { testRedisClient } from '../../../test/support/redis-prefix';
import { testKeyPrefix } from '../../../test/support/env';

/**
 * A seeded fuzz of malformed requests over every route of the document (issue 14): odd path
 * parameters, query strings, bodies, content types and credentials. Whatever comes in, the answer
 * is never a 5xx and always the envelope with an X-Request-Id. The seed is printed, and
 * FUZZ_SEED=<n> replays a run.
 */

const REQUESTS = 2400;
const SEED = Number(process.env.FUZZ_SEED ?? 20261123);

/** mulberry32: a small, seedable PRNG, so a failing run can be replayed exactly. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Method = 'get' | 'post' | 'patch' | 'delete' | 'put';
const METHODS: Method[] = ['get', 'post', 'patch', 'delete', 'put'];

// Every operation of the API and of the internal routes; the two documents' own paths answer with a
// document, not an envelope.
const pathsOf = (doc: Readonly<Record<string, unknown>>) => Object.entries((doc as { paths: Record<string, Record<string, unknown>> }).paths);
const operations = [...pathsOf(openApiDocument), ...pathsOf(internalOpenApiDocument)]
  .filter(([template]) => !template.endsWith('/openapi.json'))
  .flatMap(([template, item]) => METHODS.filter((m) => item[m] !== undefined).map((method) => ({ method, template })));

describe('route fuzz: malformed requests over every route', () => {
  let fx: GatewayFixture;
  let company: Company;
  // The internal routes' company (regenerating its tokens must not revoke the tokens the fuzz sends with).
  let victim: Company;
  let shipment: string;
  let webhookId: string;
  beforeAll(async () => {
    fx = await startGatewayFixture('route-fuzz', { env: { RATE_LIMIT_PER_MINUTE: '100000' } });
    company = await createCompany(fx.gw, { planActivo: true, creditos: 1000, sucursalesHabilitadas: true });
    victim = await createCompany(fx.gw, { planActivo: true, creditos: 1000, sucursalesHabilitadas: true });
    const created = await fx.gw.http.post('/api/v1/guias').set('Authorization', bearer(company.live)).send(guia());
    shipment = (created.body as { data: { numeroGuia: string } }).data.numeroGuia;
    const hook = await fx.gw.http.post('/api/v1/webhooks').set('Authorization', bearer(company.live)).send({ url: 'https://receiver.example/hook' });
    webhookId = (hook.body as { data: { id: string } }).data.id;
  });
  afterAll(() => fx?.stop());

  it(`answers ${REQUESTS} malformed requests with the envelope, an X-Request-Id and never a 5xx (seed ${SEED})`, async () => {
    expect(operations.length).toBeGreaterThanOrEqual(28);
    const random = prng(SEED);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
    const junkStrings = [
      '', ' ', '%', '%zz', '%00', '..', '../..', 'null', 'undefined', '-1', '0', '1e309', 'NaN', '💥', 'ñ'.repeat(300), 'x'.repeat(5000),
      "'; drop table guias; --", '<script>', '{}', '[]', 'true', '\u0000', '%F0%9F', '%E2%82', 'SVC-0000000000', shipment, webhookId,
      '00000000-0000-0000-0000-000000000000', 'a/b', '?', '#',
    ];
    const junkValue = (depth = 0): unknown => {
      switch (Math.floor(random() * (depth > 2 ? 6 : 9))) {
        case 0: return null;
        case 1: return random() < 0.5;
        case 2: return pick([0, -1, 1e308, -1e308, 0.1, 2 ** 53 + 1, 1.5]);
        case 3: return pick(junkStrings);
        case 4: return '';
        case 5: return pick(['GUIA_ENTREGADA', 'GUIA_ANULADA', '2026-11-23T10:00:00Z', 'https://receiver.example/x', 'http://127.0.0.1/x']);
        case 6: return Array.from({ length: Math.floor(random() * 4) }, () => junkValue(depth + 1));
        default: {
          const keys = ['destinatario', 'paquete', 'evento', 'motivo', 'url', 'eventos', 'activo', 'desde', 'hasta', 'solaparHoras', 'nombre', 'peso', '__proto__', 'constructor', 'x'];
          const obj: Record<string, unknown> = {};
          for (let i = Math.floor(random() * 4); i > 0; i--) obj[pick(keys)] = junkValue(depth + 1);
          return obj;
        }
      }
    };
    const bodies: Array<() => { type?: string; data?: string | object }> = [
      () => ({}),
      () => ({ type: 'application/json', data: JSON.stringify(junkValue()) }),
      () => ({ type: 'application/json', data: pick(['{', '{"a":', '[1,2', 'nul', '"\\u12"', '{"a":1}}', '\u0000', '{"a":1e999}']) }),
      () => ({ type: pick(['text/plain', 'application/xml', 'multipart/form-data; boundary=x', 'application/json; charset=latin1', 'application/x-www-form-urlencoded']), data: 'a=1&b=2' }),
      // As the client serialises it (superagent sends objects and arrays as JSON, strings as they are).
      () => {
        const v = junkValue();
        return { data: typeof v === 'object' && v !== null ? (v as object) : JSON.stringify(v) };
      },
      () => ({ type: 'application/json', data: JSON.stringify(guia()) }),
    ];
    const auths = [
      () => bearer(company.live),
      () => bearer(company.live),
      () => bearer(company.test),
      () => undefined,
      () => pick(['Bearer', 'Bearer ', 'Basic abc', `Bearer ${'svc_live_'.padEnd(200, 'x')}`, 'Bearer svc_live_nope', `Bearer ${ADMIN_TOKEN}`, 'bearer  x y']),
    ];

    const http = request(`http://127.0.0.1:${fx.gw.port}`);
    // Wrong admin tokens (a company's, a junk one) are guesses: after 10 a minute from this address
    // every internal route would answer 429, and the fuzz would stop reaching them. The window is
    // emptied between batches, so the internal routes keep being fuzzed behind the guard.
    const redis = testRedisClient();
    const resetAdminLimit = async (): Promise<void> => {
      const keys = await redis.keys(`${testKeyPrefix(fx.prefix)}:admin:auth:*`);
      if (keys.length > 0) await redis.del(...keys);
    };
    const failures: string[] = [];
    const byStatus = new Map<number, number>();
    const BATCH = 16;
    for (let sent = 0; sent < REQUESTS; sent += BATCH) {
      await Promise.all(
        Array.from({ length: BATCH }, async () => {
          const op = pick(operations);
          const method = random() < 0.9 ? op.method : pick(METHODS);
          const path =
            op.template.replace(/\{[^}]+\}/g, () => (random() < 0.4 ? pick([shipment, webhookId, victim.id]) : encodeURIComponent(pick(junkStrings)).slice(0, 2000))) +
            (random() < 0.3 ? `?${pick(['limit', 'cursor', 'estado', 'exitoso', 'desde', 'page', 'limit[]'])}=${encodeURIComponent(pick(junkStrings)).slice(0, 500)}` : '');
          const internal = path.startsWith('/internal/');
          const auth = internal && random() < 0.7 ? `Bearer ${ADMIN_TOKEN}` : pick(auths)();
          const body = pick(bodies)();
          let r = http[method](path);
          if (auth !== undefined) r = r.set('Authorization', auth);
          // Only what an HTTP client can send as a header value (the HTTP layer's own refusals are http-parser-errors.test.ts's).
          if (random() < 0.2) r = r.set('Idempotency-Key', pick(junkStrings).replace(/[^\x20-\x7e]/g, '').slice(0, 300) || 'k');
          if (body.type) r = r.set('Content-Type', body.type);
          if (body.data !== undefined && method !== 'get') r = r.send(body.data);
          const res = await r.catch((err: Error) => ({ status: 0, headers: {} as Record<string, string>, body: undefined, text: err.message }));
          byStatus.set(res.status, (byStatus.get(res.status) ?? 0) + 1);
          const envelope = res.body as { success?: unknown; error?: { message?: unknown; code?: unknown }; data?: unknown } | undefined;
          const isEnvelope =
            envelope !== undefined &&
            ((envelope.success === false && typeof envelope.error?.message === 'string' && typeof envelope.error.code === 'string') ||
              (envelope.success === true && 'data' in envelope));
          if (res.status >= 500 || res.status === 0 || !isEnvelope || !res.headers['x-request-id']) {
            failures.push(`${method.toUpperCase()} ${path.slice(0, 120)} → ${res.status} ${String(res.text).slice(0, 200)}`);
          }
        }),
      );
      await resetAdminLimit();
    }
    await redis.quit();
    console.log(`route fuzz (seed ${SEED}): ${REQUESTS} requests over ${operations.length} operations; answers by status ${JSON.stringify(Object.fromEntries([...byStatus].sort(([a], [b]) => a - b)))}`);
    expect(failures.slice(0, 20)).toEqual([]);
  }, 180_000);
});
