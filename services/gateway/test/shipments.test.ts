import type pg from 'pg';
import { validateGuiaCreate } from '@svc/contracts';
import {
  bearer,
  createBranch,
  createCompany,
  type Company,
  type TestGateway,
  startGatewayFixture,
  type GatewayFixture,
} from '../../../test/support/test-gateway';
import { hashToken } from '../src/auth/token';
import { findPrincipalByHash } from '../src/auth/token.repository';
import { generateNumeroGuia } from '../src/shipments/numero-guia';
import { createShipments } from '../src/shipments/shipment.service';
import { scopeOf } from '../src/companies/company-scope';
import { count, createBatch, createOne, empresaRow, guia, moveOn } from '../../../test/support/shipment-fixtures';

const NUMERO = /^SVC[0-9A-HJKMNP-TV-Z]{10}$/;
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const envelope = (code: string) => ({ success: false, error: { code, message: expect.any(String) } });
const funded = { planActivo: true, creditos: 1000 };

describe('shipments: creation, listing and tracking', () => {
  let fx: GatewayFixture;
  let gw: TestGateway;
  let pool: pg.Pool;

  beforeAll(async () => {
    fx = await startGatewayFixture('guias');
    ({ gw, pool } = fx);
  });
  afterAll(() => fx?.stop());

  describe('POST /api/v1/guias', () => {
    it('creates a shipment in status CREADA with its history entry and GUIA_CREADA event', async () => {
      const c = await createCompany(gw, funded);
      const body = guia(1, { referencia: 'PED-1001', observaciones: 'Fragil' });
      const res = await createOne(gw, c.live, body);
      expect(res.status).toBe(201);
      expect(res.body).toEqual({
        success: true,
        data: {
          numeroGuia: expect.stringMatching(NUMERO),
          estado: 'CREADA',
          sucursalId: null,
          createdAt: expect.stringMatching(ISO),
          destinatario: body.destinatario,
          paquete: body.paquete,
          referencia: 'PED-1001',
          observaciones: 'Fragil',
        },
      });
      const numero = res.body.data.numeroGuia as string;
      const row = await pool.query('select id, modo, estado, empresa_id from guias where numero_guia = $1', [numero]);
      expect(row.rows[0]).toMatchObject({ modo: 'live', estado: 'CREADA', empresa_id: c.id });
      const history = await pool.query('select estado, evento from guia_historial where guia_id = $1', [row.rows[0].id]);
      expect(history.rows).toEqual([{ estado: 'CREADA', evento: 'GUIA_CREADA' }]);
      const events = await pool.query(
        "select evento, empresa_id, sucursal_id, data, request_id from outbox where data->>'numeroGuia' = $1",
        [numero],
      );
      expect(events.rows).toEqual([
        {
          evento: 'GUIA_CREADA',
          empresa_id: c.id,
          sucursal_id: null,
          data: { numeroGuia: numero, estado: 'CREADA' },
          request_id: res.headers['x-request-id'],
        },
      ]);
    });

    it('answers referencia null when absent, and never repeats a numeroGuia', async () => {
      const c = await createCompany(gw, funded);
      const numbers = new Set<string>();
      for (let i = 0; i < 5; i++) {
        const res = await createOne(gw, c.live, guia(i));
        expect(res.status).toBe(201);
        expect(res.body.data.referencia).toBeNull();
        expect(res.body.data).not.toHaveProperty('observaciones');
        numbers.add(res.body.data.numeroGuia as string);
      }
      expect(numbers.size).toBe(5);
    });

    it('retries the whole creation with new numbers when a generated one is already taken', async () => {
      const c = await createCompany(gw, { planActivo: true, creditos: 10 });
      const taken = (await createOne(gw, c.live)).body.data.numeroGuia as string;
      const principal = (await findPrincipalByHash(gw.deps.db, hashToken(c.live)))!;
      const given: string[] = [];
      // The first two numbers collide with an existing shipment; the third is fresh.
      const numbers = () => {
        const n = given.length < 2 ? taken : generateNumeroGuia();
        given.push(n);
        return n;
      };
      const ctx = { owner: scopeOf(principal), requestId: 'req-collision', idempotency: undefined };
      const answer = await createShipments(gw.deps, ctx, [validateGuiaCreate(guia(2))], 'single', numbers);
      expect(answer.status).toBe(201);
      expect(given).toHaveLength(3);
      expect((answer.body as { data: { numeroGuia: string } }).data.numeroGuia).toBe(given[2]);
      expect(await count(pool, 'select count(*) n from guias where empresa_id = $1', [c.id])).toBe(2);
      expect(await count(pool, 'select count(*) n from outbox where empresa_id = $1', [c.id])).toBe(2);
      expect(await empresaRow(pool, c.id)).toMatchObject({ creditos: 8, guias_hoy: 2 });
      // A number that keeps colliding gives up after four attempts, charging nothing.
      await expect(createShipments(gw.deps, ctx, [validateGuiaCreate(guia(3))], 'single', () => taken)).rejects.toMatchObject({ code: '23505' });
      expect(await empresaRow(pool, c.id)).toMatchObject({ creditos: 8, guias_hoy: 2 });
    });

    it('associates a shipment made with a branch token with that branch, and its event too', async () => {
      const c = await createCompany(gw, { ...funded, sucursalesHabilitadas: true });
      const s = await createBranch(gw, c.id);
      const res = await createOne(gw, s.live);
      expect(res.status).toBe(201);
      expect(res.body.data.sucursalId).toBe(s.id);
      const ev = await pool.query("select sucursal_id, empresa_id from outbox where data->>'numeroGuia' = $1", [
        res.body.data.numeroGuia,
      ]);
      expect(ev.rows).toEqual([{ sucursal_id: s.id, empresa_id: c.id }]);
    });

    it.each([
      ['a missing field', { destinatario: { nombre: 'A', telefono: '1' }, paquete: { peso: 1 } }, 'destinatario.direccion'],
      ['an empty string', guia(1, { destinatario: { nombre: '', telefono: '1', direccion: 'x' } }), 'destinatario.nombre'],
      ['a weight of zero', guia(1, { paquete: { peso: 0 } }), 'paquete.peso'],
      ['a weight that is text', guia(1, { paquete: { peso: '2' } }), 'paquete.peso'],
      ['an unknown field', guia(1, { color: 'rojo' }), 'color'],
      ['no paquete', { destinatario: guia().destinatario }, 'paquete'],
      ['an array body', [guia()], '(body)'],
      ['a NUL character', guia(1, { destinatario: { nombre: 'A\u0000B', telefono: '1', direccion: 'x' } }), 'destinatario.nombre'],
      ['an unpaired surrogate', guia(1, { referencia: 'R-\ud800' }), 'referencia'],
    ])('400 VALIDATION_ERROR naming the field for %s', async (_name, body, field) => {
      const c = await createCompany(gw, funded);
      const res = await createOne(gw, c.live, body);
      expect(res.status).toBe(400);
      expect(res.body).toEqual(envelope('VALIDATION_ERROR'));
      expect(res.body.error.message).toContain(field);
      expect(await count(pool, 'select count(*) n from guias where empresa_id = $1', [c.id])).toBe(0);
    });

    it('415 for a body that is not JSON, 405 for another method', async () => {
      const c = await createCompany(gw, funded);
      const res = await gw.http.post('/api/v1/guias').set('Authorization', bearer(c.live)).type('text').send('hola');
      expect(res.status).toBe(415);
      const del = await gw.http.delete('/api/v1/guias').set('Authorization', bearer(c.live));
      expect(del.status).toBe(405);
      expect(del.body).toEqual(envelope('METHOD_NOT_ALLOWED'));
      expect(del.headers.allow).toBe('POST, GET');
      const get = await gw.http.get('/api/v1/guias/batch').set('Authorization', bearer(c.live));
      expect(get.status).toBe(405);
      expect(get.headers.allow).toBe('POST');
    });
  });

  describe('POST /api/v1/guias/batch', () => {
    it('creates every shipment, answering them in the order given', async () => {
      const c = await createCompany(gw, funded);
      const items = [1, 2, 3, 4, 5].map((n) => guia(n, { referencia: `R-${n}` }));
      const res = await createBatch(gw, c.live, items);
      expect(res.status).toBe(201);
      const guias = res.body.data.guias as Array<Record<string, unknown>>;
      expect(Object.keys(res.body.data)).toEqual(['guias']);
      expect(guias.map((g) => g.referencia)).toEqual(['R-1', 'R-2', 'R-3', 'R-4', 'R-5']);
      for (const [i, g] of guias.entries()) {
        expect(g).toEqual({
          numeroGuia: expect.stringMatching(NUMERO),
          estado: 'CREADA',
          sucursalId: null,
          createdAt: expect.stringMatching(ISO),
          destinatario: items[i]!.destinatario,
          paquete: items[i]!.paquete,
          referencia: `R-${i + 1}`,
        });
      }
      expect(await count(pool, 'select count(*) n from guias where empresa_id = $1', [c.id])).toBe(5);
      expect(await count(pool, "select count(*) n from outbox where empresa_id = $1 and evento = 'GUIA_CREADA'", [c.id])).toBe(5);
    });

    it('rejects the whole batch naming the index of an invalid item; nothing is created', async () => {
      const c = await createCompany(gw, funded);
      const items = [guia(0), guia(1), { destinatario: { nombre: 'X', direccion: 'Y' }, paquete: { peso: 1 } }, guia(3)];
      const res = await createBatch(gw, c.live, items);
      expect(res.status).toBe(400);
      expect(res.body).toEqual(envelope('VALIDATION_ERROR'));
      expect(res.body.error.message).toContain('guias[2].destinatario.telefono');
      const unstorable = await createBatch(gw, c.live, [guia(0), guia(1, { paquete: { peso: 1, descripcion: 'caja\u0000' } })]);
      expect(unstorable.status).toBe(400);
      expect(unstorable.body.error.message).toContain('guias[1].paquete.descripcion');
      expect(await count(pool, 'select count(*) n from guias where empresa_id = $1', [c.id])).toBe(0);
      expect(await count(pool, 'select count(*) n from outbox where empresa_id = $1', [c.id])).toBe(0);
    });

    it('accepts 1 and 100 items, refuses 0 and 101', async () => {
      const c = await createCompany(gw, funded);
      expect((await createBatch(gw, c.live, [guia()])).status).toBe(201);
      expect((await createBatch(gw, c.live, Array.from({ length: 100 }, (_, i) => guia(i)))).status).toBe(201);
      for (const n of [0, 101]) {
        const res = await createBatch(gw, c.live, Array.from({ length: n }, (_, i) => guia(i)));
        expect(res.status).toBe(400);
        expect(res.body.error.message).toContain('guias');
      }
      const missing = await gw.http.post('/api/v1/guias/batch').set('Authorization', bearer(c.live)).send({});
      expect(missing.status).toBe(400);
      expect(missing.body.error.message).toContain('guias');
      expect(await count(pool, 'select count(*) n from guias where empresa_id = $1', [c.id])).toBe(101);
    });
  });

  describe('GET /api/v1/guias', () => {
    let c: Company;
    let branchA: Company;
    let branchB: Company;
    let own: string[] = [];
    let ofA: string[] = [];

    beforeAll(async () => {
      c = await createCompany(gw, { ...funded, sucursalesHabilitadas: true });
      branchA = await createBranch(gw, c.id, 'A');
      branchB = await createBranch(gw, c.id, 'B');
      own = [];
      ofA = [];
      for (let i = 0; i < 3; i++) own.push((await createOne(gw, c.live, guia(i))).body.data.numeroGuia as string);
      for (let i = 0; i < 2; i++) ofA.push((await createOne(gw, branchA.live, guia(i))).body.data.numeroGuia as string);
      own.push((await createOne(gw, c.live, guia(9))).body.data.numeroGuia as string);
    });

    const list = (token: string, query = '') => gw.http.get(`/api/v1/guias${query}`).set('Authorization', bearer(token));

    it('a company token lists all the company shipments, branches included, newest first', async () => {
      const res = await list(c.live);
      expect(res.status).toBe(200);
      const numbers = (res.body.data.guias as Array<{ numeroGuia: string }>).map((g) => g.numeroGuia);
      expect(numbers).toEqual([own[3], ofA[1], ofA[0], own[2], own[1], own[0]]);
      expect(res.body.data.nextCursor).toBeNull();
      expect(res.body.data.guias[1]).toMatchObject({ sucursalId: branchA.id, estado: 'CREADA', referencia: null });
    });

    it('a branch token lists only its branch shipments', async () => {
      const a = await list(branchA.live);
      expect((a.body.data.guias as Array<{ numeroGuia: string }>).map((g) => g.numeroGuia)).toEqual([ofA[1], ofA[0]]);
      const b = await list(branchB.live);
      expect(b.status).toBe(200);
      expect(b.body.data).toEqual({ guias: [], nextCursor: null });
    });

    it('another company sees none of them', async () => {
      const other = await createCompany(gw, funded);
      const res = await list(other.live);
      expect(res.body.data).toEqual({ guias: [], nextCursor: null });
    });

    it('pages with limit and the opaque cursor until nextCursor is null', async () => {
      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const res = await list(c.live, `?limit=4${cursor ? `&cursor=${cursor}` : ''}`);
        expect(res.status).toBe(200);
        const page = res.body.data.guias as Array<{ numeroGuia: string }>;
        expect(page.length).toBeLessThanOrEqual(4);
        seen.push(...page.map((g) => g.numeroGuia));
        cursor = res.body.data.nextCursor as string | null;
        pages++;
      } while (cursor);
      expect(pages).toBe(2);
      expect(seen).toEqual([own[3], ofA[1], ofA[0], own[2], own[1], own[0]]);
      // An exact multiple of the page: the last full page still says whether more exist.
      const exact = await list(c.live, '?limit=6');
      expect(exact.body.data.nextCursor).toBeNull();
      const five = await list(c.live, '?limit=5');
      expect(five.body.data.nextCursor).toEqual(expect.any(String));
    });

    it.each([['0'], ['101'], ['abc'], ['1.5'], ['-1'], ['']])('400 VALIDATION_ERROR naming limit for limit=%s', async (v) => {
      const res = await list(c.live, `?limit=${v}`);
      expect(res.status).toBe(400);
      expect(res.body).toEqual(envelope('VALIDATION_ERROR'));
      expect(res.body.error.message).toContain('limit');
    });

    it('400 naming limit when given twice, and naming cursor for one not made by the listing', async () => {
      const twice = await list(c.live, '?limit=1&limit=2');
      expect(twice.status).toBe(400);
      expect(twice.body.error.message).toContain('limit');
      for (const bad of ['xyz', 'MA', Buffer.from('-5').toString('base64url'), Buffer.from('99999999999999999999').toString('base64url'), '!!']) {
        const res = await list(c.live, `?cursor=${encodeURIComponent(bad)}`);
        expect(res.status).toBe(400);
        expect(res.body.error.message).toContain('cursor');
      }
    });
  });

  describe('GET /api/v1/guias/{numeroGuia}/tracking', () => {
    it('answers the history, oldest first, each entry exactly { estado, evento, fecha, motivo? }', async () => {
      const c = await createCompany(gw, funded);
      const numero = (await createOne(gw, c.live)).body.data.numeroGuia as string;
      const steps = [
        { evento: 'GUIA_RECOLECTADA' },
        { evento: 'GUIA_EN_BODEGA' },
        { evento: 'GUIA_ACTUALIZADA' },
        { evento: 'GUIA_EN_RUTA' },
        { evento: 'GUIA_INTENTO_FALLIDO', motivo: 'Nadie en casa' },
        { evento: 'GUIA_EN_RUTA' },
        { evento: 'GUIA_ENTREGADA', fechaEntrega: '2026-11-20T15:30:00.000Z' },
      ];
      for (const s of steps) expect((await moveOn(gw, numero, s)).status).toBe(200);
      const res = await gw.http.get(`/api/v1/guias/${numero}/tracking`).set('Authorization', bearer(c.live));
      expect(res.status).toBe(200);
      expect(res.body.data.numeroGuia).toBe(numero);
      expect(res.body.data.estado).toBe('ENTREGADO');
      const historial = res.body.data.historial as Array<Record<string, string>>;
      expect(historial.map((h) => [h.evento, h.estado])).toEqual([
        ['GUIA_CREADA', 'CREADA'],
        ['GUIA_RECOLECTADA', 'RECOLECTADA'],
        ['GUIA_EN_BODEGA', 'EN_BODEGA'],
        ['GUIA_ACTUALIZADA', 'EN_BODEGA'],
        ['GUIA_EN_RUTA', 'EN_RUTA'],
        ['GUIA_INTENTO_FALLIDO', 'INTENTO_FALLIDO'],
        ['GUIA_EN_RUTA', 'EN_RUTA'],
        ['GUIA_ENTREGADA', 'ENTREGADO'],
      ]);
      expect(historial[5]).toEqual({ estado: 'INTENTO_FALLIDO', evento: 'GUIA_INTENTO_FALLIDO', fecha: expect.stringMatching(ISO), motivo: 'Nadie en casa' });
      expect(historial[7]).toEqual({ estado: 'ENTREGADO', evento: 'GUIA_ENTREGADA', fecha: expect.stringMatching(ISO) });
      expect(historial[0]).toEqual({ estado: 'CREADA', evento: 'GUIA_CREADA', fecha: expect.stringMatching(ISO) });
      const fechas = historial.map((h) => Date.parse(h.fecha!));
      expect([...fechas].sort((a, b) => a - b)).toEqual(fechas);
    });

    it('404 for another company, another branch, or an unknown number; the company sees its branch ones', async () => {
      const c = await createCompany(gw, { ...funded, sucursalesHabilitadas: true });
      const a = await createBranch(gw, c.id, 'A');
      const b = await createBranch(gw, c.id, 'B');
      const other = await createCompany(gw, funded);
      const numero = (await createOne(gw, a.live)).body.data.numeroGuia as string;
      const track = (token: string, n = numero) => gw.http.get(`/api/v1/guias/${n}/tracking`).set('Authorization', bearer(token));
      expect((await track(a.live)).status).toBe(200);
      expect((await track(c.live)).status).toBe(200);
      const odd = [await track(c.live, 'SVC%00'), await track(c.live, 'SVC%C3%B1'), await track(c.live, 'x'.repeat(300))];
      for (const res of [await track(b.live), await track(other.live), await track(c.live, 'SVC0000000000'), ...odd]) {
        expect(res.status).toBe(404);
        expect(res.body).toEqual(envelope('NOT_FOUND'));
      }
    });
  });
});
