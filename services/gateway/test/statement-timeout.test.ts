import { sql } from 'kysely';
import { count, createOne, guia } from '../../../test/support/shipment-fixtures';
import { createCompany, startGatewayFixture, type Company, type GatewayFixture } from '../../../test/support/test-gateway';

/**
 * DB_STATEMENT_TIMEOUT_MS on the gateway's own pool: a statement held past it (here by a row lock
 * the test keeps) is cancelled by Postgres, the request answers 503 with nothing written, and the
 * pool goes on serving.
 */
describe('the gateway pool\'s statement_timeout', () => {
  let fx: GatewayFixture;
  let c: Company;

  beforeAll(async () => {
    fx = await startGatewayFixture('stmttimeout', { env: { DB_STATEMENT_TIMEOUT_MS: '500' } });
    c = await createCompany(fx.gw, { planActivo: true, creditos: 10 });
  });
  afterAll(() => fx?.stop());

  it('is the setting, on the pool the app uses', async () => {
    expect((await sql<{ t: string }>`select current_setting('statement_timeout') as t`.execute(fx.gw.deps.db)).rows).toEqual([{ t: '500ms' }]);
  });

  it('cancels a creation stuck behind a lock: 503 SERVICE_UNAVAILABLE, nothing created, and the next one goes through', async () => {
    expect((await createOne(fx.gw, c.live, guia(1))).status).toBe(201); // warms the token
    const holder = await fx.pool.connect();
    try {
      await holder.query('begin');
      await holder.query('select 1 from empresas where id = $1 for update', [c.id]);
      const stuck = await createOne(fx.gw, c.live, guia(2));
      expect(stuck.status).toBe(503);
      expect(stuck.body).toEqual({ success: false, error: { code: 'SERVICE_UNAVAILABLE', message: expect.any(String) } });
    } finally {
      await holder.query('rollback');
      holder.release();
    }
    expect(await count(fx.pool, 'select count(*) n from guias where empresa_id = $1', [c.id])).toBe(1);
    expect(fx.gw.logs.text()).toMatch(/canceling statement due to statement timeout/);
    expect((await createOne(fx.gw, c.live, guia(3))).status).toBe(201);
    expect(await count(fx.pool, 'select count(*) n from guias where empresa_id = $1', [c.id])).toBe(2);
  });
});
