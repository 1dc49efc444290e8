import type pg from 'pg';
import { createCompany, type TestGateway, startGatewayFixture, type GatewayFixture } from '../../../test/support/test-gateway';
import { count, createBatch, createOne, empresaRow, guia } from '../../../test/support/shipment-fixtures';

const envelope = (code: string) => ({ success: false, error: { code, message: expect.any(String) } });
const funded = { planActivo: true, creditos: 100 };

describe('Idempotency-Key on the creation routes', () => {
  let fx: GatewayFixture;
  let gw: TestGateway;
  let pool: pg.Pool;

  beforeAll(async () => {
    fx = await startGatewayFixture('idem');
    ({ gw, pool } = fx);
  });
  afterAll(() => fx?.stop());

  const guiasOf = (empresaId: string) => count(pool, 'select count(*) n from guias where empresa_id = $1', [empresaId]);
  const eventsOf = (empresaId: string) => count(pool, 'select count(*) n from outbox where empresa_id = $1', [empresaId]);

  it('answers a retried request with the first answer, creating and charging nothing more', async () => {
    const c = await createCompany(gw, funded);
    const first = await createOne(gw, c.live, guia(1), 'pedido-1001');
    expect(first.status).toBe(201);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    for (let i = 0; i < 3; i++) {
      const again = await createOne(gw, c.live, guia(1), 'pedido-1001');
      expect(again.status).toBe(201);
      expect(again.text).toBe(first.text);
      expect(again.headers['idempotent-replayed']).toBe('true');
    }
    expect(await guiasOf(c.id)).toBe(1);
    expect(await eventsOf(c.id)).toBe(1);
    expect(await empresaRow(pool, c.id)).toMatchObject({ creditos: 99, guias_hoy: 1 });
  });

  it('treats the same JSON with its keys in another order as the same body', async () => {
    const c = await createCompany(gw, funded);
    const body = { paquete: { peso: 2 }, destinatario: { telefono: '1', direccion: 'x', nombre: 'Ana' } };
    const reordered = { destinatario: { nombre: 'Ana', direccion: 'x', telefono: '1' }, paquete: { peso: 2 } };
    const first = await createOne(gw, c.live, body, 'k-order');
    const again = await createOne(gw, c.live, reordered, 'k-order');
    expect(again.status).toBe(201);
    expect(again.body.data.numeroGuia).toBe(first.body.data.numeroGuia);
    expect(await guiasOf(c.id)).toBe(1);
  });

  it('409 IDEMPOTENCY_CONFLICT for the same key with another body; nothing is created', async () => {
    const c = await createCompany(gw, funded);
    expect((await createOne(gw, c.live, guia(1), 'k-conflict')).status).toBe(201);
    const other = await createOne(gw, c.live, guia(2), 'k-conflict');
    expect(other.status).toBe(409);
    expect(other.body).toEqual(envelope('IDEMPOTENCY_CONFLICT'));
    expect(await guiasOf(c.id)).toBe(1);
    expect(await empresaRow(pool, c.id)).toMatchObject({ creditos: 99 });
  });

  it('replays a batch too, and keeps the keys of the two routes and of each token apart', async () => {
    const c = await createCompany(gw, funded);
    const items = [guia(1), guia(2), guia(3)];
    const first = await createBatch(gw, c.live, items, 'k-shared');
    expect(first.status).toBe(201);
    const again = await createBatch(gw, c.live, items, 'k-shared');
    expect(again.text).toBe(first.text);
    // The same key on the single route, and with the test token, are other keys.
    expect((await createOne(gw, c.live, guia(9), 'k-shared')).status).toBe(201);
    const test = await createOne(gw, c.test, guia(9), 'k-shared');
    expect(test.status).toBe(201);
    expect(test.headers['idempotent-replayed']).toBeUndefined();
    expect(await guiasOf(c.id)).toBe(5);
    expect(await empresaRow(pool, c.id)).toMatchObject({ creditos: 96 });
  });

  it('concurrent requests with one key and body create once and all get the same answer', async () => {
    const c = await createCompany(gw, funded);
    const answers = await Promise.all(Array.from({ length: 12 }, () => createOne(gw, c.live, guia(7), 'k-race')));
    expect(answers.map((a) => a.status)).toEqual(Array(12).fill(201));
    expect(new Set(answers.map((a) => a.body.data.numeroGuia)).size).toBe(1);
    expect(answers.filter((a) => a.headers['idempotent-replayed'] === 'true')).toHaveLength(11);
    const batches = await Promise.all(Array.from({ length: 6 }, () => createBatch(gw, c.live, [guia(1), guia(2)], 'k-race-batch')));
    expect(new Set(batches.map((a) => a.text)).size).toBe(1);
    expect(await guiasOf(c.id)).toBe(3);
    expect(await eventsOf(c.id)).toBe(3);
    expect(await empresaRow(pool, c.id)).toMatchObject({ creditos: 97, guias_hoy: 3 });
  });

  it('concurrent requests with one key and different bodies: one creates, the others conflict', async () => {
    const c = await createCompany(gw, funded);
    const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => createOne(gw, c.live, guia(i), 'k-race-bodies')));
    expect(answers.filter((a) => a.status === 201)).toHaveLength(1);
    expect(answers.filter((a) => a.status === 409)).toHaveLength(7);
    expect(await guiasOf(c.id)).toBe(1);
  });

  it('does not keep the key of a refused creation: after the refusal is lifted, the key creates', async () => {
    const c = await createCompany(gw, { planActivo: true, creditos: 0 });
    const refused = await createOne(gw, c.live, guia(1), 'k-refused');
    expect(refused.status).toBe(402);
    expect(await count(pool, "select count(*) n from idempotencia where clave = 'k-refused'")).toBe(0);
    await gw.admin('post', `/empresas/${c.id}/creditos`, { cantidad: 5 });
    const created = await createOne(gw, c.live, guia(1), 'k-refused');
    expect(created.status).toBe(201);
    expect(created.headers['idempotent-replayed']).toBeUndefined();
    // An invalid body with a key stores nothing either.
    expect((await createOne(gw, c.live, { destinatario: {} }, 'k-invalid')).status).toBe(400);
    expect(await count(pool, "select count(*) n from idempotencia where clave = 'k-invalid'")).toBe(0);
  });

  it('lets a key older than 24 hours be used again, for a new creation', async () => {
    const c = await createCompany(gw, funded);
    const first = await createOne(gw, c.live, guia(1), 'k-old');
    await pool.query("update idempotencia set created_at = now() - interval '23 hours 59 minutes' where clave = 'k-old'");
    expect((await createOne(gw, c.live, guia(2), 'k-old')).status).toBe(409);
    await pool.query("update idempotencia set created_at = now() - interval '24 hours 1 minute' where clave = 'k-old'");
    const second = await createOne(gw, c.live, guia(2), 'k-old');
    expect(second.status).toBe(201);
    expect(second.body.data.numeroGuia).not.toBe(first.body.data.numeroGuia);
    // From now on the key answers the second creation.
    const replay = await createOne(gw, c.live, guia(2), 'k-old');
    expect(replay.body).toEqual(second.body);
    expect(await guiasOf(c.id)).toBe(2);
    expect(await empresaRow(pool, c.id)).toMatchObject({ creditos: 98 });
  });

  it('400 VALIDATION_ERROR for a key that is empty or longer than 255 characters', async () => {
    const c = await createCompany(gw, funded);
    for (const key of ['', 'x'.repeat(256)]) {
      const res = await createOne(gw, c.live, guia(1), key);
      expect(res.status).toBe(400);
      expect(res.body).toEqual(envelope('VALIDATION_ERROR'));
      expect(res.body.error.message).toContain('Idempotency-Key');
    }
    expect((await createOne(gw, c.live, guia(1), 'x'.repeat(255))).status).toBe(201);
    expect(await guiasOf(c.id)).toBe(1);
  });

  it('400 VALIDATION_ERROR, not 500, for a deeply nested body sent with a key; nothing is kept under the key', async () => {
    const c = await createCompany(gw, funded);
    const deep = `${'{"a":'.repeat(100_000)}1${'}'.repeat(100_000)}`;
    for (const path of ['/api/v1/guias', '/api/v1/guias/batch']) {
      const res = await gw.http
        .post(path)
        .set('Authorization', `Bearer ${c.live}`)
        .set('Content-Type', 'application/json')
        .set('Idempotency-Key', 'k-deep')
        .send(deep);
      expect(res.status).toBe(400);
      expect(res.body).toEqual(envelope('VALIDATION_ERROR'));
    }
    expect(gw.logs.text()).not.toContain('unhandled error');
    expect((await createOne(gw, c.live, guia(1), 'k-deep')).status).toBe(201);
    expect(await guiasOf(c.id)).toBe(1);
  });
});
