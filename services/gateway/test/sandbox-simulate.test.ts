import type pg from 'pg';
import { bearer, createBranch, createCompany, type Company, type TestGateway, startGatewayFixture, type GatewayFixture } from '../../../test/support/test-gateway';
import { count, createBatch, createOne, empresaRow, guia, moveOn, simulate } from '../../../test/support/shipment-fixtures';

const envelope = (code: string) => ({ success: false, error: { code, message: expect.any(String) } });

/** `POST /api/v1/guias/{numeroGuia}/simular` and SANDBOX_DAILY_LIMIT (docs/integrators.md, The sandbox). */
describe('sandbox: simular and the sandbox daily limit', () => {
  const LIMIT = 6;
  let fx: GatewayFixture;
  let gw: TestGateway;
  let pool: pg.Pool;

  beforeAll(async () => {
    fx = await startGatewayFixture('sandbox-simulate', { env: { RATE_LIMIT_PER_MINUTE: '100000', SANDBOX_DAILY_LIMIT: String(LIMIT) } });
    ({ gw, pool } = fx);
  });
  afterAll(() => fx?.stop());

  const ship = async (token: string): Promise<string> => (await createOne(gw, token).expect(201)).body.data.numeroGuia as string;
  const eventsOf = async (numeroGuia: string) =>
    (await pool.query("select evento, secuencia, modo, sucursal_id from outbox where data ->> 'numeroGuia' = $1 order by secuencia", [numeroGuia])).rows;
  const track = (token: string, n: string) => gw.http.get(`/api/v1/guias/${n}/tracking`).set('Authorization', bearer(token));
  const pgDay = async (offset = 0): Promise<string> =>
    (await pool.query<{ d: string }>(`select ((now() at time zone 'America/Guatemala')::date + $1::int)::text d`, [offset])).rows[0]!.d;
  const sandboxCounter = async (empresaId: string) =>
    (await pool.query('select guias_sandbox_hoy, guias_sandbox_hoy_dia::text from empresas where id = $1', [empresaId])).rows[0] as {
      guias_sandbox_hoy: number;
      guias_sandbox_hoy_dia: string | null;
    };

  describe('simular', () => {
    let c: Company;
    let a: Company & { empresaId: string };
    let b: Company & { empresaId: string };

    beforeAll(async () => {
      c = await createCompany(gw, { planActivo: true, creditos: 100, sucursalesHabilitadas: true });
      a = await createBranch(gw, c.id, 'A');
      b = await createBranch(gw, c.id, 'B');
    });
    // Each test starts with the whole sandbox allowance.
    beforeEach(() => pool.query('update empresas set guias_sandbox_hoy = 0, guias_sandbox_hoy_dia = null where id = $1', [c.id]));

    it('moves the caller\'s sandbox shipment through to ENTREGADO: 200 { numeroGuia, estado }, each move a test event', async () => {
      const n = await ship(c.test);
      const route: Array<[Record<string, unknown>, string]> = [
        [{ evento: 'GUIA_RECOLECTADA' }, 'RECOLECTADA'],
        [{ evento: 'GUIA_EN_BODEGA' }, 'EN_BODEGA'],
        [{ evento: 'GUIA_EN_RUTA' }, 'EN_RUTA'],
        [{ evento: 'GUIA_INTENTO_FALLIDO', motivo: 'Nadie en casa' }, 'INTENTO_FALLIDO'],
        [{ evento: 'GUIA_EN_RUTA' }, 'EN_RUTA'],
        [{ evento: 'GUIA_ENTREGADA', fechaEntrega: '2026-11-23T15:00:00.000Z' }, 'ENTREGADO'],
      ];
      for (const [body, estado] of route) {
        const res = await simulate(gw, c.test, n, body);
        expect(res.status).toBe(200);
        expect(res.body).toEqual({ success: true, data: { numeroGuia: n, estado } });
      }
      const tracked = await track(c.test, n);
      expect(tracked.body.data.estado).toBe('ENTREGADO');
      expect(tracked.body.data.historial).toHaveLength(7);
      expect(await eventsOf(n)).toEqual(
        ['GUIA_CREADA', 'GUIA_RECOLECTADA', 'GUIA_EN_BODEGA', 'GUIA_EN_RUTA', 'GUIA_INTENTO_FALLIDO', 'GUIA_EN_RUTA', 'GUIA_ENTREGADA'].map(
          (evento, i) => ({ evento, secuencia: i + 1, modo: 'test', sucursal_id: null }),
        ),
      );
      const delivered = await pool.query(
        "select data from outbox where data ->> 'numeroGuia' = $1 and evento = 'GUIA_ENTREGADA'",
        [n],
      );
      expect(delivered.rows[0].data).toEqual({ numeroGuia: n, estado: 'ENTREGADO', fechaEntrega: '2026-11-23T15:00:00.000Z' });
    });

    it('has the internal route\'s rules: 409 INVALID_TRANSITION, 400 VALIDATION_ERROR, nothing moved', async () => {
      const n = await ship(c.test);
      expect(await simulate(gw, c.test, n, { evento: 'GUIA_ENTREGADA' })).toMatchObject({ status: 409, body: envelope('INVALID_TRANSITION') });
      for (const body of [{}, { evento: 'GUIA_CREADA' }, { evento: 'PING' }, { evento: 'GUIA_PERDIDA' }, { evento: 'GUIA_RECOLECTADA', fechaEntrega: '2026-11-23T15:00:00Z' }]) {
        expect(await simulate(gw, c.test, n, body)).toMatchObject({ status: 400, body: envelope('VALIDATION_ERROR') });
      }
      expect((await track(c.test, n)).body.data.estado).toBe('CREADA');
      expect(await eventsOf(n)).toHaveLength(1);
      // The same answers the courier's route gives for the same requests.
      expect(await moveOn(gw, n, { evento: 'GUIA_ENTREGADA' })).toMatchObject({ status: 409, body: envelope('INVALID_TRANSITION') });
      expect((await simulate(gw, c.test, n, { evento: 'GUIA_ANULADA' })).body.data).toEqual({ numeroGuia: n, estado: 'ANULADA' });
      expect(await simulate(gw, c.test, n, { evento: 'GUIA_ACTUALIZADA' })).toMatchObject({ status: 409, body: envelope('INVALID_TRANSITION') });
    });

    it('403 FORBIDDEN for a live token (the company\'s or a branch\'s), even on its own live shipment; nothing moves', async () => {
      const live = await ship(c.live);
      const sandbox = await ship(c.test);
      for (const [token, n] of [
        [c.live, live],
        [c.live, sandbox],
        [a.live, sandbox],
        [a.live, 'SVC-NO-EXISTE'],
      ] as const) {
        expect(await simulate(gw, token, n, { evento: 'GUIA_RECOLECTADA' })).toMatchObject({ status: 403, body: envelope('FORBIDDEN') });
      }
      expect((await track(c.live, live)).body.data.estado).toBe('CREADA');
      expect((await track(c.test, sandbox)).body.data.estado).toBe('CREADA');
    });

    it('404 NOT_FOUND for any shipment that is not the caller\'s sandbox shipment', async () => {
      const live = await ship(c.live);
      const ofA = await ship(a.test);
      const other = await createCompany(gw);
      const ofOther = await ship(other.test);
      for (const [token, n] of [
        [c.test, live], // a live shipment of the caller's own company
        [c.test, ofOther], // another company's sandbox shipment
        [b.test, ofA], // another branch's sandbox shipment
        [a.test, await ship(c.test)], // the company's own (not the branch's)
        [c.test, 'SVC-000000000000'],
        [c.test, 'no es una guia'],
      ] as const) {
        expect(await simulate(gw, token, n, { evento: 'GUIA_RECOLECTADA' })).toMatchObject({ status: 404, body: envelope('NOT_FOUND') });
      }
      expect((await track(c.live, live)).body.data.estado).toBe('CREADA');
      expect((await track(a.test, ofA)).body.data.estado).toBe('CREADA');
      expect((await track(other.test, ofOther)).body.data.estado).toBe('CREADA');
    });

    it('a branch test token moves its branch\'s sandbox shipments, the company test token every one of the company', async () => {
      const ofA = await ship(a.test);
      expect((await simulate(gw, a.test, ofA, { evento: 'GUIA_RECOLECTADA' })).body.data).toEqual({ numeroGuia: ofA, estado: 'RECOLECTADA' });
      expect((await simulate(gw, c.test, ofA, { evento: 'GUIA_EN_BODEGA' })).body.data).toEqual({ numeroGuia: ofA, estado: 'EN_BODEGA' });
      // The branch's event, as live branch events are: routed by its branch.
      expect((await eventsOf(ofA)).map((e) => [e.evento, e.modo, e.sucursal_id])).toEqual([
        ['GUIA_CREADA', 'test', a.id],
        ['GUIA_RECOLECTADA', 'test', a.id],
        ['GUIA_EN_BODEGA', 'test', a.id],
      ]);
    });
  });

  describe('SANDBOX_DAILY_LIMIT', () => {
    it('counts the sandbox shipments of the company and its branches apart from the daily limit and credits; past it 429 DAILY_GUIDE_LIMIT', async () => {
      const c = await createCompany(gw, { planActivo: true, creditos: 3, limiteDiario: 3, sucursalesHabilitadas: true });
      const s = await createBranch(gw, c.id);
      expect((await createBatch(gw, c.test, [guia(1), guia(2), guia(3)])).status).toBe(201);
      expect((await createBatch(gw, s.test, [guia(4), guia(5)])).status).toBe(201);
      // One left: a batch of two is refused whole, nothing created, nothing counted, no events.
      const refused = await createBatch(gw, s.test, [guia(6), guia(7)]);
      expect(refused.status).toBe(429);
      expect(refused.body).toEqual(envelope('DAILY_GUIDE_LIMIT'));
      expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
      expect((await createOne(gw, c.test)).status).toBe(201);
      expect(await createOne(gw, s.test)).toMatchObject({ status: 429, body: envelope('DAILY_GUIDE_LIMIT') });
      expect(await sandboxCounter(c.id)).toEqual({ guias_sandbox_hoy: LIMIT, guias_sandbox_hoy_dia: await pgDay() });
      expect(await count(pool, "select count(*) n from guias where empresa_id = $1 and modo = 'test'", [c.id])).toBe(LIMIT);
      expect(await count(pool, "select count(*) n from outbox where empresa_id = $1 and modo = 'test'", [c.id])).toBe(LIMIT);
      // The live allowance and the credits are untouched, and still usable to the last unit.
      expect(await empresaRow(pool, c.id)).toEqual({ creditos: 3, guias_hoy: 0, guias_hoy_dia: null });
      expect((await createBatch(gw, c.live, [guia(1), guia(2), guia(3)])).status).toBe(201);
      expect(await createOne(gw, c.test)).toMatchObject({ status: 429 });
      expect(await sandboxCounter(c.id)).toMatchObject({ guias_sandbox_hoy: LIMIT });
    });

    it("resets when Postgres's day in Guatemala moves on; a counter on a later day keeps counting", async () => {
      const c = await createCompany(gw);
      await pool.query('update empresas set guias_sandbox_hoy = $2, guias_sandbox_hoy_dia = $3 where id = $1', [c.id, LIMIT, await pgDay(-1)]);
      expect((await createBatch(gw, c.test, [guia(1), guia(2)])).status).toBe(201);
      expect(await sandboxCounter(c.id)).toEqual({ guias_sandbox_hoy: 2, guias_sandbox_hoy_dia: await pgDay() });
      await pool.query('update empresas set guias_sandbox_hoy = $2, guias_sandbox_hoy_dia = $3 where id = $1', [c.id, LIMIT, await pgDay(1)]);
      expect(await createOne(gw, c.test)).toMatchObject({ status: 429, body: envelope('DAILY_GUIDE_LIMIT') });
    });

    it('two concurrent sandbox creations at the limit never overspend it: one is created, the other refused', async () => {
      for (let round = 0; round < 10; round++) {
        const c = await createCompany(gw, { sucursalesHabilitadas: true });
        const s = await createBranch(gw, c.id);
        await pool.query('update empresas set guias_sandbox_hoy = $2, guias_sandbox_hoy_dia = $3 where id = $1', [c.id, LIMIT - 1, await pgDay()]);
        const answers = await Promise.all([createOne(gw, c.test, guia(1)), createOne(gw, s.test, guia(2))]);
        expect(answers.map((r) => r.status).sort()).toEqual([201, 429]);
        expect(await sandboxCounter(c.id)).toMatchObject({ guias_sandbox_hoy: LIMIT });
        expect(await count(pool, 'select count(*) n from guias where empresa_id = $1', [c.id])).toBe(1);
      }
    });

    it('40 concurrent creations and batches from two gateways create exactly SANDBOX_DAILY_LIMIT', async () => {
      const other = await fx.addGateway({ env: { RATE_LIMIT_PER_MINUTE: '100000', SANDBOX_DAILY_LIMIT: String(LIMIT) } });
      const c = await createCompany(gw);
      const answers = await Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          i % 4 === 0 ? createBatch(i % 8 === 0 ? gw : other, c.test, [guia(i), guia(i + 100)]) : createOne(i % 2 ? gw : other, c.test, guia(i)),
        ),
      );
      const created = answers.filter((r) => r.status === 201);
      const made = created.reduce((n, r) => n + (r.body.data.guias ? (r.body.data.guias as unknown[]).length : 1), 0);
      expect(made).toBe(LIMIT);
      for (const r of answers.filter((x) => x.status !== 201)) expect(r.body).toEqual(envelope('DAILY_GUIDE_LIMIT'));
      expect(await count(pool, 'select count(*) n from guias where empresa_id = $1', [c.id])).toBe(LIMIT);
      expect(await sandboxCounter(c.id)).toMatchObject({ guias_sandbox_hoy: LIMIT });
    });
  });
});
