import type pg from 'pg';
import { bearer, createBranch, createCompany, type TestGateway, startGatewayFixture, type GatewayFixture } from '../../../test/support/test-gateway';
import { count, createBatch, createOne, empresaRow, guia, moveOn } from '../../../test/support/shipment-fixtures';

describe('sandbox (test tokens)', () => {
  let fx: GatewayFixture;
  let gw: TestGateway;
  let pool: pg.Pool;

  beforeAll(async () => {
    fx = await startGatewayFixture('sandbox');
    ({ gw, pool } = fx);
  });
  afterAll(() => fx?.stop());

  const numbers = (res: { body: { data: { guias: Array<{ numeroGuia: string }> } } }) => res.body.data.guias.map((g) => g.numeroGuia);
  const list = (token: string) => gw.http.get('/api/v1/guias').set('Authorization', bearer(token));
  const track = (token: string, n: string) => gw.http.get(`/api/v1/guias/${n}/tracking`).set('Authorization', bearer(token));

  it('creates without credits, plan or daily allowance, and takes none of them (only the sandbox cap)', async () => {
    // A company that could not create a single live shipment.
    const c = await createCompany(gw, { planActivo: false, creditos: 2, limiteDiario: 0 });
    expect((await createOne(gw, c.live)).status).toBe(429);
    const one = await createOne(gw, c.test);
    expect(one.status).toBe(201);
    expect(one.body.data).toMatchObject({ estado: 'CREADA', sucursalId: null });
    const batch = await createBatch(gw, c.test, Array.from({ length: 100 }, (_, i) => guia(i)));
    expect(batch.status).toBe(201);
    expect(batch.body.data.guias).toHaveLength(100);
    expect(await empresaRow(pool, c.id)).toEqual({ creditos: 2, guias_hoy: 0, guias_hoy_dia: null });
    expect((await gw.admin('get', `/empresas/${c.id}`)).body.data.guiasHoy).toBe(0);
    expect(await count(pool, "select count(*) n from guias where empresa_id = $1 and modo = 'test'", [c.id])).toBe(101);
    // Their GUIA_CREADA events are test events, for the test webhooks.
    expect(await count(pool, "select count(*) n from outbox where empresa_id = $1 and modo = 'test' and evento = 'GUIA_CREADA'", [c.id])).toBe(101);
    expect(await count(pool, "select count(*) n from outbox where empresa_id = $1 and modo = 'live'", [c.id])).toBe(0);
    expect(await count(pool, 'select guias_sandbox_hoy n from empresas where id = $1', [c.id])).toBe(101);
  });

  it('keeps test and live shipments apart in listings and tracking', async () => {
    const c = await createCompany(gw, { planActivo: true, creditos: 10 });
    const live = (await createOne(gw, c.live, guia(1))).body.data.numeroGuia as string;
    const test = (await createOne(gw, c.test, guia(2))).body.data.numeroGuia as string;
    expect(numbers(await list(c.live))).toEqual([live]);
    expect(numbers(await list(c.test))).toEqual([test]);
    expect((await track(c.live, live)).status).toBe(200);
    expect((await track(c.test, test)).status).toBe(200);
    expect((await track(c.live, test)).status).toBe(404);
    expect((await track(c.test, live)).status).toBe(404);
    // Another company's test token sees nothing of either.
    const other = await createCompany(gw);
    expect(numbers(await list(other.test))).toEqual([]);
    expect((await track(other.test, test)).status).toBe(404);
  });

  it('scopes branch test tokens to their branch, and the company test token sees them all', async () => {
    const c = await createCompany(gw, { sucursalesHabilitadas: true });
    const a = await createBranch(gw, c.id, 'A');
    const b = await createBranch(gw, c.id, 'B');
    const ofA = (await createOne(gw, a.test)).body.data;
    expect(ofA.sucursalId).toBe(a.id);
    const ofCompany = (await createOne(gw, c.test)).body.data.numeroGuia as string;
    expect(numbers(await list(a.test))).toEqual([ofA.numeroGuia]);
    expect(numbers(await list(b.test))).toEqual([]);
    expect(numbers(await list(a.live))).toEqual([]);
    expect(numbers(await list(c.test))).toEqual([ofCompany, ofA.numeroGuia]);
    expect((await track(b.test, ofA.numeroGuia as string)).status).toBe(404);
  });

  it('moves a sandbox shipment through its states (courier route), each move a test event in the outbox', async () => {
    const c = await createCompany(gw);
    const numero = (await createOne(gw, c.test)).body.data.numeroGuia as string;
    for (const evento of ['GUIA_RECOLECTADA', 'GUIA_EN_BODEGA', 'GUIA_EN_RUTA', 'GUIA_ENTREGADA']) {
      expect((await moveOn(gw, numero, { evento })).status).toBe(200);
    }
    const res = await track(c.test, numero);
    expect(res.body.data.estado).toBe('ENTREGADO');
    expect(res.body.data.historial).toHaveLength(5);
    const events = await pool.query("select evento, secuencia, modo from outbox where data ->> 'numeroGuia' = $1 order by secuencia", [numero]);
    expect(events.rows).toEqual(
      ['GUIA_CREADA', 'GUIA_RECOLECTADA', 'GUIA_EN_BODEGA', 'GUIA_EN_RUTA', 'GUIA_ENTREGADA'].map((evento, i) => ({ evento, secuencia: i + 1, modo: 'test' })),
    );
  });
});
