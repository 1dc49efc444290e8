import type pg from 'pg';
import { ADMIN_TOKEN, createBranch, createCompany, type Company, type TestGateway, startGatewayFixture, type GatewayFixture } from '../../../test/support/test-gateway';
import { count, createBatch, createOne, guia, manualClock, moveOn } from '../../../test/support/shipment-fixtures';

const envelope = (code: string) => ({ success: false, error: { code, message: expect.any(String) } });

const ESTADOS = ['CREADA', 'RECOLECTADA', 'EN_BODEGA', 'EN_RUTA', 'ENTREGADO', 'INTENTO_FALLIDO', 'DEVOLUCION', 'ANULADA'] as const;
const EVENTOS = [
  'GUIA_RECOLECTADA',
  'GUIA_EN_BODEGA',
  'GUIA_EN_RUTA',
  'GUIA_ENTREGADA',
  'GUIA_INTENTO_FALLIDO',
  'GUIA_DEVOLUCION',
  'GUIA_ANULADA',
  'GUIA_ACTUALIZADA',
] as const;
type Estado = (typeof ESTADOS)[number];
type Evento = (typeof EVENTOS)[number];

// The courier's state machine as the operator's contract gives it, written out here independently
// of the implementation's table.
const ALLOWED: Record<Evento, Partial<Record<Estado, Estado>>> = {
  GUIA_RECOLECTADA: { CREADA: 'RECOLECTADA' },
  GUIA_EN_BODEGA: { RECOLECTADA: 'EN_BODEGA', INTENTO_FALLIDO: 'EN_BODEGA' },
  GUIA_EN_RUTA: { EN_BODEGA: 'EN_RUTA', INTENTO_FALLIDO: 'EN_RUTA' },
  GUIA_ENTREGADA: { EN_RUTA: 'ENTREGADO' },
  GUIA_INTENTO_FALLIDO: { EN_RUTA: 'INTENTO_FALLIDO' },
  GUIA_DEVOLUCION: { EN_BODEGA: 'DEVOLUCION', EN_RUTA: 'DEVOLUCION', INTENTO_FALLIDO: 'DEVOLUCION' },
  GUIA_ANULADA: { CREADA: 'ANULADA', RECOLECTADA: 'ANULADA' },
  GUIA_ACTUALIZADA: {
    CREADA: 'CREADA',
    RECOLECTADA: 'RECOLECTADA',
    EN_BODEGA: 'EN_BODEGA',
    EN_RUTA: 'EN_RUTA',
    INTENTO_FALLIDO: 'INTENTO_FALLIDO',
    DEVOLUCION: 'DEVOLUCION',
  },
};

const CASES = ESTADOS.flatMap((from) => EVENTOS.map((evento) => [from, evento, ALLOWED[evento][from] ?? null] as const));
const NOW = '2026-11-22T16:45:00.000Z';

describe('shipment transitions (POST /internal/v1/guias/{numeroGuia}/eventos)', () => {
  let fx: GatewayFixture;
  let gw: TestGateway;
  let pool: pg.Pool;
  let company: Company;
  const shipmentOf = new Map<string, string>();

  beforeAll(async () => {
    fx = await startGatewayFixture('transitions', { clock: manualClock(new Date(NOW)) });
    ({ gw, pool } = fx);
    company = await createCompany(gw, { planActivo: true, creditos: 1000, sucursalesHabilitadas: true });
    // One live shipment per case, put straight into the case's starting status.
    const created = await createBatch(gw, company.live, CASES.map((_, i) => guia(i)));
    expect(created.status).toBe(201);
    const numbers = (created.body.data.guias as Array<{ numeroGuia: string }>).map((g) => g.numeroGuia);
    for (const [i, [from, evento]] of CASES.entries()) {
      shipmentOf.set(`${from}/${evento}`, numbers[i]!);
      await pool.query('update guias set estado = $1 where numero_guia = $2', [from, numbers[i]]);
    }
  });
  afterAll(() => fx?.stop());

  const estadoOf = async (numero: string) =>
    (await pool.query<{ estado: string }>('select estado from guias where numero_guia = $1', [numero])).rows[0]?.estado;
  const eventsFor = async (numero: string) =>
    (
      await pool.query<{ evento: string; data: Record<string, unknown>; empresa_id: string; sucursal_id: string | null; request_id: string }>(
        "select evento, data, empresa_id, sucursal_id, request_id from outbox where data->>'numeroGuia' = $1 and evento <> 'GUIA_CREADA' order by created_at",
        [numero],
      )
    ).rows;
  const historyOf = (numero: string) =>
    count(pool, 'select count(*) n from guia_historial h join guias g on g.id = h.guia_id where g.numero_guia = $1', [numero]);

  it('covers all 64 pairs, 18 of them allowed', () => {
    expect(CASES).toHaveLength(64);
    expect(CASES.filter(([, , to]) => to !== null)).toHaveLength(18);
  });

  it.each(CASES)('from %s, %s → %s', async (from, evento, to) => {
    const numero = shipmentOf.get(`${from}/${evento}`)!;
    const body: Record<string, string> = { evento };
    if (evento === 'GUIA_DEVOLUCION') body.motivo = 'Dirección incorrecta';
    const res = await moveOn(gw, numero, body);
    if (to === null) {
      expect(res.status).toBe(409);
      expect(res.body).toEqual(envelope('INVALID_TRANSITION'));
      expect(await estadoOf(numero)).toBe(from);
      expect(await eventsFor(numero)).toEqual([]);
      expect(await historyOf(numero)).toBe(1);
      return;
    }
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ success: true, data: { numeroGuia: numero, estado: to } });
    expect(await estadoOf(numero)).toBe(to);
    expect(await historyOf(numero)).toBe(2);
    const data: Record<string, unknown> = { numeroGuia: numero, estado: to };
    if (evento === 'GUIA_ENTREGADA') data.fechaEntrega = NOW; // not given: the clock's now
    if (evento === 'GUIA_DEVOLUCION') data.motivo = 'Dirección incorrecta';
    expect(await eventsFor(numero)).toEqual([
      { evento, data, empresa_id: company.id, sucursal_id: null, request_id: res.headers['x-request-id'] },
    ]);
  });

  it('routes the event of a branch shipment by its branch, and keeps a given fechaEntrega', async () => {
    const branch = await createBranch(gw, company.id);
    const numero = (await createOne(gw, branch.live)).body.data.numeroGuia as string;
    for (const evento of ['GUIA_RECOLECTADA', 'GUIA_EN_BODEGA', 'GUIA_EN_RUTA']) {
      expect((await moveOn(gw, numero, { evento })).status).toBe(200);
    }
    expect((await moveOn(gw, numero, { evento: 'GUIA_ENTREGADA', fechaEntrega: '2026-11-21T10:00:00-06:00' })).status).toBe(200);
    const events = await eventsFor(numero);
    expect(events.map((e) => e.evento)).toEqual(['GUIA_RECOLECTADA', 'GUIA_EN_BODEGA', 'GUIA_EN_RUTA', 'GUIA_ENTREGADA']);
    for (const e of events) expect(e).toMatchObject({ empresa_id: company.id, sucursal_id: branch.id });
    expect(events[3]!.data).toEqual({ numeroGuia: numero, estado: 'ENTREGADO', fechaEntrega: '2026-11-21T16:00:00.000Z' });
  });

  it.each([
    ['GUIA_DEVOLUCION without motivo', { evento: 'GUIA_DEVOLUCION' }, 'motivo'],
    ['GUIA_CREADA', { evento: 'GUIA_CREADA' }, 'evento'],
    ['an unknown event', { evento: 'GUIA_PERDIDA' }, 'evento'],
    ['no event', {}, 'evento'],
    ['fechaEntrega with another event', { evento: 'GUIA_RECOLECTADA', fechaEntrega: NOW }, 'fechaEntrega'],
    ['a fechaEntrega that is not a date-time', { evento: 'GUIA_ENTREGADA', fechaEntrega: 'mañana' }, 'fechaEntrega'],
    ['a leap-second fechaEntrega (a date-time, but no instant)', { evento: 'GUIA_ENTREGADA', fechaEntrega: '2026-12-31T23:59:60Z' }, 'fechaEntrega'],
    ['an unknown field', { evento: 'GUIA_RECOLECTADA', color: 'rojo' }, 'color'],
  ])('400 VALIDATION_ERROR for %s, naming the field', async (_name, body, field) => {
    const numero = (await createOne(gw, company.live)).body.data.numeroGuia as string;
    const res = await moveOn(gw, numero, body);
    expect(res.status).toBe(400);
    expect(res.body).toEqual(envelope('VALIDATION_ERROR'));
    expect(res.body.error.message).toContain(field);
    expect(await estadoOf(numero)).toBe('CREADA');
  });

  it('404 for an unknown numeroGuia, 401 without the admin token, 405 for another method', async () => {
    const unknown = await moveOn(gw, 'SVC0000000000', { evento: 'GUIA_RECOLECTADA' });
    expect(unknown.status).toBe(404);
    expect(unknown.body).toEqual(envelope('NOT_FOUND'));
    // Not a number this service could have issued (Postgres would refuse the NUL): not found, not 500.
    const nul = await gw.admin('post', '/guias/SVC%00/eventos', { evento: 'GUIA_RECOLECTADA' });
    expect(nul.status).toBe(404);
    expect(nul.body).toEqual(envelope('NOT_FOUND'));
    const numero = (await createOne(gw, company.live)).body.data.numeroGuia as string;
    const anon = await gw.http.post(`/internal/v1/guias/${numero}/eventos`).send({ evento: 'GUIA_RECOLECTADA' });
    expect(anon.status).toBe(401);
    const wrong = await gw.http
      .post(`/internal/v1/guias/${numero}/eventos`)
      .set('Authorization', `Bearer ${ADMIN_TOKEN}x`)
      .send({ evento: 'GUIA_RECOLECTADA' });
    expect(wrong.status).toBe(401);
    const get = await gw.admin('get', `/guias/${numero}/eventos`);
    expect(get.status).toBe(405);
    expect(get.headers.allow).toBe('POST');
    expect(await estadoOf(numero)).toBe('CREADA');
  });

  it('serialises concurrent transitions of one shipment: ten GUIA_RECOLECTADA, one succeeds', async () => {
    const numero = (await createOne(gw, company.live)).body.data.numeroGuia as string;
    const answers = await Promise.all(Array.from({ length: 10 }, () => moveOn(gw, numero, { evento: 'GUIA_RECOLECTADA' })));
    expect(answers.filter((a) => a.status === 200)).toHaveLength(1);
    expect(answers.filter((a) => a.status === 409)).toHaveLength(9);
    expect(await historyOf(numero)).toBe(2);
    expect(await eventsFor(numero)).toHaveLength(1);
  });
});
