import { createCompany, startGatewayFixture, type GatewayFixture } from '../../../test/support/test-gateway';
import { count, createOne, guia } from '../../../test/support/shipment-fixtures';
import { createIdempotencyRetention } from '../src/idempotency/idempotency.retention';

describe('idempotency keys past RETENTION_DAYS', () => {
  let fx: GatewayFixture;

  beforeAll(async () => {
    fx = await startGatewayFixture('idem-retention', { env: { RETENTION_DAYS: '7' } });
  });
  afterAll(() => fx?.stop());

  it('are removed in batches; younger keys (expired or live), shipments and their history stay', async () => {
    expect(fx.gw.deps.config.retentionDays).toBe(7);
    const c = await createCompany(fx.gw, { planActivo: true, creditos: 100 });
    expect((await createOne(fx.gw, c.live, guia(1), 'pedido-live')).status).toBe(201);
    // 250 keys claimed 8 days ago, 3 claimed 2 days ago (expired, but within retention).
    await fx.pool.query(
      `insert into idempotencia (scope, clave, request_hash, status_code, response, created_at)
       select 't:r', 'old-' || g, 'h', 201, '"{}"', now() - interval '8 days' from generate_series(1, 250) g`,
    );
    await fx.pool.query(
      `insert into idempotencia (scope, clave, request_hash, created_at)
       select 't:r', 'recent-' || g, 'h', now() - interval '2 days' from generate_series(1, 3) g`,
    );
    // The shipment is older than retention too: the customer's data is never removed.
    await fx.pool.query(`update guias set created_at = now() - interval '90 days'`);
    await fx.pool.query(`update guia_historial set fecha = now() - interval '90 days'`);

    const retention = createIdempotencyRetention({ db: fx.gw.deps.db, logger: fx.gw.deps.logger, retentionDays: 7, batchSize: 100, pauseMs: 0 });
    expect(await retention.runOnce()).toBe(250);
    expect(await count(fx.pool, `select count(*) n from idempotencia where clave like 'old-%'`)).toBe(0);
    expect(await count(fx.pool, `select count(*) n from idempotencia where clave like 'recent-%'`)).toBe(3);
    expect(await count(fx.pool, `select count(*) n from idempotencia where clave = 'pedido-live'`)).toBe(1);
    expect(await count(fx.pool, 'select count(*) n from guias where empresa_id = $1', [c.id])).toBe(1);
    expect(await count(fx.pool, 'select count(*) n from guia_historial')).toBeGreaterThanOrEqual(1);
    // The gateway's own periodic pass uses the same setting.
    expect(await fx.gw.idempotencyRetention.runOnce()).toBe(0);
  });
});
