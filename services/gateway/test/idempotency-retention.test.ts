import { createCompany, startGatewayFixture, type GatewayFixture } from '../../../test/support/test-gateway';
import { count, createOne, guia } from '../../../test/support/shipment-fixtures';
import { createIdempotencyRetention } from '../src/idempotency/idempotency.retention';
import { claimKey, findAnswer, KEY_LIFETIME_HOURS } from '../src/idempotency/idempotency.repository';

describe('idempotency keys past their 24 hours', () => {
  let fx: GatewayFixture;

  beforeAll(async () => {
    // RETENTION_DAYS does not keep them: an answer holds a recipient's name, phone and address.
    fx = await startGatewayFixture('idem-retention', { env: { RETENTION_DAYS: '7' } });
  });
  afterAll(() => fx?.stop());

  it('go with their day once every key of it has expired; an expired key answers nothing before; live keys, shipments and their history stay', async () => {
    expect(KEY_LIFETIME_HOURS).toBe(24);
    const c = await createCompany(fx.gw, { planActivo: true, creditos: 100 });
    expect((await createOne(fx.gw, c.live, guia(1), 'pedido-live')).status).toBe(201);
    // 250 keys claimed 8 days ago, 3 claimed 25 hours ago (expired, well within RETENTION_DAYS), 2
    // claimed 23 hours ago (still answering).
    await fx.pool.query(
      `insert into idempotencia (scope, clave, request_hash, status_code, response, created_at)
       select 't:r', 'old-' || g, 'h', 201, '"{}"', now() - interval '8 days' from generate_series(1, 250) g`,
    );
    await fx.pool.query(
      `insert into idempotencia (scope, clave, request_hash, status_code, response, created_at)
       select 't:r', 'expired-' || g, 'h', 201, '"{\\"destinatario\\":\\"Ana\\"}"', now() - interval '25 hours' from generate_series(1, 3) g`,
    );
    await fx.pool.query(
      `insert into idempotencia (scope, clave, request_hash, status_code, response, created_at)
       select 't:r', 'live-' || g, 'h', 201, '"{}"', now() - interval '23 hours' from generate_series(1, 2) g`,
    );
    // The shipment is older than everything: the customer's data is never removed.
    await fx.pool.query(`update guias set created_at = now() - interval '90 days'`);
    await fx.pool.query(`update guia_historial set fecha = now() - interval '90 days'`);

    // An expired key is not honoured though its row is still there: it is claimed again. A live one is not.
    // (In a transaction rolled back, so the claim leaves no row.)
    const claims: boolean[] = [];
    await fx.gw.deps.db
      .transaction()
      .execute(async (trx) => {
        claims.push(await claimKey(trx, 't:r', 'expired-1', 'other'), await claimKey(trx, 't:r', 'live-1', 'other'));
        throw new Error('roll back');
      })
      .catch(() => undefined);
    expect(claims).toEqual([true, false]);
    const answers = await fx.gw.deps.db.transaction().execute(async (trx) => [await findAnswer(trx, 't:r', 'expired-2'), await findAnswer(trx, 't:r', 'live-2')]);
    expect(answers).toEqual([undefined, { requestHash: 'h', statusCode: 201, body: '{}' }]);

    // The day 8 days back ended more than 24 hours ago: it goes, whole. Yesterday's keys stay for now.
    const retention = createIdempotencyRetention({ db: fx.gw.deps.db, logger: fx.gw.deps.logger });
    expect(await retention.runOnce()).toBe(250);
    expect(await count(fx.pool, `select count(*) n from idempotencia where clave like 'old-%'`)).toBe(0);
    expect(await count(fx.pool, `select count(*) n from idempotencia where clave like 'expired-%'`)).toBe(3);
    expect(await count(fx.pool, `select count(*) n from idempotencia where clave like 'live-%'`)).toBe(2);
    expect(await count(fx.pool, `select count(*) n from idempotencia where clave = 'pedido-live'`)).toBe(1);
    expect(await count(fx.pool, 'select count(*) n from guias where empresa_id = $1', [c.id])).toBe(1);
    expect(await count(fx.pool, 'select count(*) n from guia_historial')).toBeGreaterThanOrEqual(1);

    // A day later every key of the day 25 hours back has expired: that day goes with its answers.
    // Today's keys stay.
    const tomorrow = createIdempotencyRetention({ db: fx.gw.deps.db, logger: fx.gw.deps.logger, now: () => new Date(Date.now() + 86_400_000) });
    expect(await tomorrow.runOnce()).toBeGreaterThanOrEqual(3);
    expect(await count(fx.pool, `select count(*) n from idempotencia where clave like 'expired-%'`)).toBe(0);
    expect(await count(fx.pool, `select count(*) n from idempotencia where clave = 'pedido-live'`)).toBe(1);
    // The gateway's own periodic pass runs the same upkeep.
    expect(await fx.gw.idempotencyRetention.runOnce()).toBe(0);
  });
});
