import type pg from 'pg';
import { MAX_CREDITOS } from '@svc/contracts';
import { createBranch, createCompany, type TestGateway, startGatewayFixture, type GatewayFixture } from '../../../test/support/test-gateway';
import { count, createBatch, createOne, empresaRow, guia, manualClock } from '../../../test/support/shipment-fixtures';

const envelope = (code: string) => ({ success: false, error: { code, message: expect.any(String) } });

describe('daily limit and credits', () => {
  let fx: GatewayFixture;
  let gw: TestGateway;
  let pool: pg.Pool;
  // 2026-11-22 05:00 UTC is 2026-11-21 23:00 in Guatemala (UTC-6): an hour before its midnight.
  const clock = manualClock(new Date('2026-11-22T05:00:00.000Z'));

  beforeAll(async () => {
    fx = await startGatewayFixture('quota', { clock });
    ({ gw, pool } = fx);
  });
  afterAll(() => fx?.stop());
  beforeEach(() => clock.set('2026-11-22T05:00:00.000Z'));

  /** Today in Guatemala by Postgres's clock, which the daily counter follows, and a day `offset` away. */
  const pgDay = async (offset = 0): Promise<string> =>
    (await pool.query<{ d: string }>(`select ((now() at time zone 'America/Guatemala')::date + $1::int)::text d`, [offset])).rows[0]!.d;
  const setCounter = (empresaId: string, guiasHoy: number, day: string) =>
    pool.query('update empresas set guias_hoy = $2, guias_hoy_dia = $3 where id = $1', [empresaId, guiasHoy, day]);

  const guiasOf = (empresaId: string) => count(pool, 'select count(*) n from guias where empresa_id = $1', [empresaId]);
  const eventsOf = (empresaId: string) => count(pool, 'select count(*) n from outbox where empresa_id = $1', [empresaId]);

  it('takes one credit and one unit of the daily limit per shipment; guiasHoy shows them', async () => {
    const c = await createCompany(gw, { planActivo: true, creditos: 10, limiteDiario: 50 });
    expect((await createOne(gw, c.live)).status).toBe(201);
    expect((await createBatch(gw, c.live, [guia(1), guia(2), guia(3)])).status).toBe(201);
    expect(await empresaRow(pool, c.id)).toEqual({ creditos: 6, guias_hoy: 4, guias_hoy_dia: await pgDay() });
    const shown = await gw.admin('get', `/empresas/${c.id}`);
    expect(shown.body.data).toMatchObject({ creditos: 6, guiasHoy: 4, limiteDiario: 50 });
  });

  it('60 concurrent creations against an allowance of 20 create exactly 20 and take exactly 20 credits', async () => {
    const c = await createCompany(gw, { planActivo: true, creditos: 100, limiteDiario: 20 });
    const answers = await Promise.all(Array.from({ length: 60 }, (_, i) => createOne(gw, c.live, guia(i))));
    const statuses = answers.map((r) => r.status);
    expect(statuses.filter((s) => s === 201)).toHaveLength(20);
    expect(statuses.filter((s) => s === 429)).toHaveLength(40);
    for (const r of answers.filter((a) => a.status === 429)) expect(r.body).toEqual(envelope('DAILY_GUIDE_LIMIT'));
    expect(await guiasOf(c.id)).toBe(20);
    expect(await eventsOf(c.id)).toBe(20);
    expect(await empresaRow(pool, c.id)).toMatchObject({ creditos: 80, guias_hoy: 20 });
  });

  it('60 concurrent creations against 20 credits create exactly 20 and leave 0 credits', async () => {
    const c = await createCompany(gw, { planActivo: true, creditos: 20, limiteDiario: 500 });
    const answers = await Promise.all(Array.from({ length: 60 }, (_, i) => createOne(gw, c.live, guia(i))));
    const statuses = answers.map((r) => r.status);
    expect(statuses.filter((s) => s === 201)).toHaveLength(20);
    expect(statuses.filter((s) => s === 402)).toHaveLength(40);
    for (const r of answers.filter((a) => a.status === 402)) expect(r.body).toEqual(envelope('PAYMENT_REQUIRED'));
    expect(await guiasOf(c.id)).toBe(20);
    expect(await empresaRow(pool, c.id)).toMatchObject({ creditos: 0, guias_hoy: 20 });
  });

  it('concurrent batches never overspend: 12 batches of 5 against an allowance of 23 create 20', async () => {
    const c = await createCompany(gw, { planActivo: true, creditos: 1000, limiteDiario: 23 });
    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, b) => createBatch(gw, c.live, [1, 2, 3, 4, 5].map((i) => guia(b * 10 + i)))),
    );
    expect(answers.filter((r) => r.status === 201)).toHaveLength(4);
    expect(answers.filter((r) => r.status === 429)).toHaveLength(8);
    expect(await guiasOf(c.id)).toBe(20);
    expect(await empresaRow(pool, c.id)).toMatchObject({ creditos: 980, guias_hoy: 20 });
  });

  it('rejects a batch that would exceed the remaining allowance whole: 429, nothing created, nothing taken, no events', async () => {
    const c = await createCompany(gw, { planActivo: true, creditos: 100, limiteDiario: 10 });
    expect((await createBatch(gw, c.live, [1, 2, 3, 4, 5, 6, 7].map((i) => guia(i)))).status).toBe(201);
    const over = await createBatch(gw, c.live, [1, 2, 3, 4].map((i) => guia(i)));
    expect(over.status).toBe(429);
    expect(over.body).toEqual(envelope('DAILY_GUIDE_LIMIT'));
    expect(over.body.error.message).toContain('3 left');
    // Like every 429, it says how long to wait: here until midnight in Guatemala, an hour away.
    expect(over.headers['retry-after']).toBe('3600');
    expect(over.headers['x-ratelimit-limit']).toBe('100');
    expect(await guiasOf(c.id)).toBe(7);
    expect(await eventsOf(c.id)).toBe(7);
    expect(await empresaRow(pool, c.id)).toMatchObject({ creditos: 93, guias_hoy: 7 });
    // What remains can still be used, exactly.
    expect((await createBatch(gw, c.live, [1, 2, 3].map((i) => guia(i)))).status).toBe(201);
    expect((await createOne(gw, c.live)).status).toBe(429);
    expect(await empresaRow(pool, c.id)).toMatchObject({ creditos: 90, guias_hoy: 10 });
  });

  it('rejects a batch that needs more credits than there are whole: 402, nothing created, nothing taken, no events', async () => {
    const c = await createCompany(gw, { planActivo: true, creditos: 4, limiteDiario: 500 });
    const res = await createBatch(gw, c.live, [1, 2, 3, 4, 5].map((i) => guia(i)));
    expect(res.status).toBe(402);
    expect(res.body).toEqual(envelope('PAYMENT_REQUIRED'));
    expect(await guiasOf(c.id)).toBe(0);
    expect(await eventsOf(c.id)).toBe(0);
    expect(await empresaRow(pool, c.id)).toMatchObject({ creditos: 4, guias_hoy: 0 });
    expect((await createBatch(gw, c.live, [1, 2, 3, 4].map((i) => guia(i)))).status).toBe(201);
    expect(await empresaRow(pool, c.id)).toMatchObject({ creditos: 0, guias_hoy: 4 });
  });

  it('names the daily limit first when both would refuse', async () => {
    const c = await createCompany(gw, { planActivo: true, creditos: 0, limiteDiario: 0 });
    const res = await createOne(gw, c.live);
    expect(res.status).toBe(429);
    expect(res.body).toEqual(envelope('DAILY_GUIDE_LIMIT'));
  });

  it.each([
    ['no plan', { planActivo: false, creditos: 50 }],
    ['an active plan with no credits', { planActivo: true, creditos: 0 }],
    ['a custom plan still PENDIENTE', { planActivo: false, creditos: 0, planPersonalizado: 'PENDIENTE' }],
    ['a RECHAZADA custom plan', { planActivo: false, creditos: 0, planPersonalizado: 'RECHAZADA' }],
  ])('402 PAYMENT_REQUIRED with %s', async (_name, fields) => {
    const c = await createCompany(gw, fields);
    const res = await createOne(gw, c.live);
    expect(res.status).toBe(402);
    expect(res.body).toEqual(envelope('PAYMENT_REQUIRED'));
    expect(await guiasOf(c.id)).toBe(0);
  });

  it('POST /creditos adds a positive integer and answers exactly { creditos }; anything else is 400 and changes nothing', async () => {
    const c = await createCompany(gw, { planActivo: true, creditos: 7 });
    const added = await gw.admin('post', `/empresas/${c.id}/creditos`, { cantidad: 5 });
    expect(added.status).toBe(200);
    expect(added.body).toEqual({ success: true, data: { creditos: 12 } });
    for (const body of [{ cantidad: 0 }, { cantidad: -3 }, { cantidad: 1.5 }, { cantidad: '5' }, {}, { cantidad: 1, extra: 1 }]) {
      const res = await gw.admin('post', `/empresas/${c.id}/creditos`, body);
      expect(res.status).toBe(400);
      expect(res.body).toEqual(envelope('VALIDATION_ERROR'));
    }
    const unknown = await gw.admin('post', '/empresas/00000000-0000-4000-8000-000000000000/creditos', { cantidad: 1 });
    expect(unknown.status).toBe(404);
    expect(await empresaRow(pool, c.id)).toMatchObject({ creditos: 12 });
  });

  it('refuses an addition that would take the balance past what the column holds with 400, not 500', async () => {
    const c = await createCompany(gw, { planActivo: true, creditos: MAX_CREDITOS - 10 });
    const over = await gw.admin('post', `/empresas/${c.id}/creditos`, { cantidad: 1_000_000_000 });
    expect(over.status).toBe(400);
    expect(over.body).toEqual(envelope('VALIDATION_ERROR'));
    expect(over.body.error.message).toContain('cantidad');
    const upTo = await gw.admin('post', `/empresas/${c.id}/creditos`, { cantidad: 10 });
    expect(upTo.body).toEqual({ success: true, data: { creditos: MAX_CREDITOS } });
    expect((await gw.admin('post', `/empresas/${c.id}/creditos`, { cantidad: 1 })).status).toBe(400);
    expect(await empresaRow(pool, c.id)).toMatchObject({ creditos: MAX_CREDITOS });
  });

  it('an APROBADA custom plan creates without credits and takes none, but still counts the daily limit', async () => {
    const c = await createCompany(gw, { planActivo: false, creditos: 3, planPersonalizado: 'APROBADA', limiteDiario: 5 });
    expect((await createBatch(gw, c.live, [1, 2, 3, 4].map((i) => guia(i)))).status).toBe(201);
    expect(await empresaRow(pool, c.id)).toMatchObject({ creditos: 3, guias_hoy: 4 });
    expect((await createBatch(gw, c.live, [1, 2].map((i) => guia(i)))).status).toBe(429);
  });

  it('counts the branches shipments in the company daily limit and credits', async () => {
    const c = await createCompany(gw, { planActivo: true, creditos: 100, limiteDiario: 4, sucursalesHabilitadas: true });
    const s = await createBranch(gw, c.id);
    expect((await createBatch(gw, s.live, [guia(1), guia(2)])).status).toBe(201);
    expect((await createBatch(gw, c.live, [guia(3), guia(4)])).status).toBe(201);
    expect((await createOne(gw, s.live)).status).toBe(429);
    expect((await createOne(gw, c.live)).status).toBe(429);
    expect(await empresaRow(pool, c.id)).toMatchObject({ creditos: 96, guias_hoy: 4 });
  });

  it("resets the daily limit when Postgres's day in Guatemala moves on, whatever the gateway's clock says", async () => {
    // The gateway's clock (manual, the 21st at 23:00 in Guatemala) plays no part in the counter.
    const c = await createCompany(gw, { planActivo: true, creditos: 100, limiteDiario: 2 });
    expect((await createBatch(gw, c.live, [guia(1), guia(2)])).status).toBe(201);
    expect((await createOne(gw, c.live)).status).toBe(429);
    expect((await gw.admin('get', `/empresas/${c.id}`)).body.data.guiasHoy).toBe(2);
    // The counter is yesterday's (as it is once midnight in Guatemala has passed): a new allowance.
    await setCounter(c.id, 2, await pgDay(-1));
    expect((await gw.admin('get', `/empresas/${c.id}`)).body.data.guiasHoy).toBe(0);
    expect((await createOne(gw, c.live)).status).toBe(201);
    expect(await empresaRow(pool, c.id)).toMatchObject({ guias_hoy: 1, guias_hoy_dia: await pgDay(), creditos: 97 });
    expect((await createOne(gw, c.live)).status).toBe(201);
    expect((await createOne(gw, c.live)).status).toBe(429);
  });

  it('never moves the counter back a day: a counter already on a later day keeps counting', async () => {
    // As left by a statement that ran after midnight, seen by one that started before it.
    const c = await createCompany(gw, { planActivo: true, creditos: 100, limiteDiario: 3 });
    const tomorrow = await pgDay(1);
    await setCounter(c.id, 2, tomorrow);
    expect((await gw.admin('get', `/empresas/${c.id}`)).body.data.guiasHoy).toBe(2);
    expect((await createOne(gw, c.live)).status).toBe(201);
    expect(await empresaRow(pool, c.id)).toMatchObject({ guias_hoy: 3, guias_hoy_dia: tomorrow });
    expect((await createOne(gw, c.live)).status).toBe(429);
    expect(await empresaRow(pool, c.id)).toMatchObject({ guias_hoy: 3, guias_hoy_dia: tomorrow, creditos: 99 });
  });

  // The other tests read "today" with the implementation's own expression, so a reset at midnight
  // UTC would pass them whenever they run outside 00:00-06:00 UTC. Here Postgres's clock is set to
  // fixed instants around 06:00 UTC (midnight in Guatemala, UTC-6 all year) and the days are the
  // test's own: a schema of this file's database whose statement_timestamp(), transaction_timestamp()
  // and now() return one stored instant, put before pg_catalog in the search_path of one more
  // gateway's connections (and that gateway's own clock set alike, for Retry-After).
  it('resets the daily limit at midnight in Guatemala (06:00 UTC), not at midnight UTC', async () => {
    await pool.query(`
      create schema fake_clock;
      create table fake_clock.instant (at timestamptz not null);
      insert into fake_clock.instant values ('2026-11-21T23:30:00Z');
      create function fake_clock.statement_timestamp() returns timestamptz language sql stable as 'select at from fake_clock.instant';
      create function fake_clock.transaction_timestamp() returns timestamptz language sql stable as 'select at from fake_clock.instant';
      create function fake_clock.now() returns timestamptz language sql stable as 'select at from fake_clock.instant';`);
    const options = encodeURIComponent('-c search_path=fake_clock,public,pg_catalog');
    const at = manualClock(new Date('2026-11-21T23:30:00Z'));
    const late = await fx.addGateway({ clock: at, databaseUrl: `${fx.database.url}?options=${options}` });
    const moveTo = async (instant: string): Promise<void> => {
      at.set(instant);
      await pool.query('update fake_clock.instant set at = $1', [instant]);
    };
    // The Guatemala day of each instant, from the tz database rather than the implementation's offset.
    const inGuatemala = (instant: string): string =>
      new Intl.DateTimeFormat('en-CA', { timeZone: 'America/Guatemala', year: 'numeric', month: '2-digit', day: '2-digit' }).format(new Date(instant));
    const steps = [
      // [instant, its day in Guatemala, seconds until the next midnight there]
      ['2026-11-21T23:30:00.000Z', '2026-11-21', 6.5 * 3600], // 17:30 in Guatemala
      ['2026-11-22T00:30:00.000Z', '2026-11-21', 5.5 * 3600], // 18:30 in Guatemala; UTC's day has moved on
      ['2026-11-22T05:59:59.000Z', '2026-11-21', 1], // 23:59:59 in Guatemala
      ['2026-11-22T06:00:00.000Z', '2026-11-22', 24 * 3600], // midnight in Guatemala
    ] as const;
    for (const [instant, day] of steps) expect(inGuatemala(instant)).toBe(day);

    const c = await createCompany(gw, { planActivo: true, creditos: 100, limiteDiario: 2 });
    const [evening, afterUtcMidnight, lastSecond, midnight] = steps;
    await moveTo(evening[0]);
    expect((await createBatch(late, c.live, [guia(1), guia(2)])).status).toBe(201);
    expect(await empresaRow(pool, c.id)).toMatchObject({ guias_hoy: 2, guias_hoy_dia: evening[1] });
    const refused = await createOne(late, c.live);
    expect(refused.status).toBe(429);
    expect(refused.headers['retry-after']).toBe(String(evening[2]));

    for (const [instant, day, untilMidnight] of [afterUtcMidnight, lastSecond]) {
      await moveTo(instant);
      expect((await late.admin('get', `/empresas/${c.id}`)).body.data.guiasHoy).toBe(2);
      const still = await createOne(late, c.live);
      expect([instant, still.status]).toEqual([instant, 429]);
      expect(still.headers['retry-after']).toBe(String(untilMidnight));
      expect(await empresaRow(pool, c.id)).toMatchObject({ guias_hoy: 2, guias_hoy_dia: day });
    }

    await moveTo(midnight[0]);
    expect((await late.admin('get', `/empresas/${c.id}`)).body.data.guiasHoy).toBe(0);
    expect((await createOne(late, c.live)).status).toBe(201);
    expect(await empresaRow(pool, c.id)).toMatchObject({ guias_hoy: 1, guias_hoy_dia: midnight[1], creditos: 97 });
    expect((await createOne(late, c.live)).status).toBe(201);
    expect((await createOne(late, c.live)).status).toBe(429);
  });

  it('counts refusals in the metrics by reason', async () => {
    const c = await createCompany(gw, { planActivo: true, creditos: 1, limiteDiario: 1 });
    // get() hands out the live objects: read the numbers at once.
    const value = async (reason: string) =>
      (await gw.deps.metrics.quotaRefusals.get()).values.find((v) => v.labels.reason === reason)?.value ?? 0;
    const before = { daily: await value('daily_limit'), credits: await value('credits') };
    expect((await createBatch(gw, c.live, [guia(1), guia(2)])).status).toBe(429);
    await gw.admin('patch', `/empresas/${c.id}`, { limiteDiario: 10 });
    expect((await createBatch(gw, c.live, [guia(1), guia(2)])).status).toBe(402);
    expect((await value('daily_limit')) - before.daily).toBe(1);
    expect((await value('credits')) - before.credits).toBe(1);
  });
});
