import type pg from 'pg';
import type { Receiver } from '../../../test/support/https-receiver';
import { bearer, createBranch, createCompany, startGatewayFixture, type GatewayFixture, type TestGateway } from '../../../test/support/test-gateway';

const envelope = (code: string) => ({ success: false, error: { code, message: expect.any(String) } });

describe('PATCH /api/v1/webhooks/{id} with activo (docs/integrators.md, Reactivation)', () => {
  let fx: GatewayFixture;
  let gw: TestGateway;
  let pool: pg.Pool;
  let receiver: Receiver;

  beforeAll(async () => {
    // The gateway sends PINGs: it reaches the loopback receiver.
    fx = await startGatewayFixture('reactivation', {
      receiver: true,
      env: { RATE_LIMIT_PER_MINUTE: '100000', DISPATCH_HOST_MAP: 'receiver.test=127.0.0.1', DISPATCH_ALLOW_CIDRS: '127.0.0.0/8' },
    });
    ({ gw, pool } = fx);
    receiver = fx.receiver!;
  });
  afterAll(() => fx?.stop());

  const api = (method: 'get' | 'post' | 'patch' | 'delete', path: string, token: string, body?: unknown) => {
    const r = gw.http[method](`/api/v1${path}`).set('Authorization', bearer(token));
    return body === undefined ? r : r.send(body as object);
  };
  const hook = async (token: string, path = '/hook'): Promise<{ id: string; createdAt: string; url: string }> => {
    const res = await api('post', '/webhooks', token, { url: receiver.url(path) });
    if (res.status !== 201) throw new Error(`${res.status} ${JSON.stringify(res.body)}`);
    return res.body.data as { id: string; createdAt: string; url: string };
  };
  const activeCount = async (empresaId: string) =>
    Number((await pool.query<{ n: string }>('select count(*) n from webhooks where empresa_id = $1 and activo', [empresaId])).rows[0]!.n);

  it('false deactivates as DELETE does (again: no error); true reactivates; each answer is the PATCH answer', async () => {
    const c = await createCompany(gw);
    const w = await hook(c.live, '/reactivate');
    const answer = (activo: boolean) => ({ success: true, data: { id: w.id, url: w.url, eventos: [], descripcion: null, activo, createdAt: w.createdAt } });

    const off = await api('patch', `/webhooks/${w.id}`, c.live, { activo: false });
    expect(off.status).toBe(200);
    expect(off.body).toEqual(answer(false));
    expect((await api('patch', `/webhooks/${w.id}`, c.live, { activo: false })).body).toEqual(answer(false));
    expect((await api('delete', `/webhooks/${w.id}`, c.live)).body).toEqual(envelope('ALREADY_INACTIVE'));
    expect((await api('get', '/webhooks', c.live)).body.data).toEqual([]);
    expect((await api('post', `/webhooks/${w.id}/test`, c.live)).body).toEqual(envelope('WEBHOOK_INACTIVE'));

    const on = await api('patch', `/webhooks/${w.id}`, c.live, { activo: true });
    expect(on.status).toBe(200);
    expect(on.body).toEqual(answer(true));
    // Active again: listed, PINGed, and true once more changes nothing.
    expect((await api('get', '/webhooks', c.live)).body.data.map((x: { id: string }) => x.id)).toEqual([w.id]);
    const ping = await api('post', `/webhooks/${w.id}/test`, c.live);
    expect(ping.body.data).toMatchObject({ exitoso: true, statusCode: 200 });
    expect(receiver.requestsTo('/reactivate')).toHaveLength(1);
    expect((await api('patch', `/webhooks/${w.id}`, c.live, { activo: true })).body).toEqual(answer(true));
    expect((await api('get', `/webhooks/${w.id}`, c.live)).body.data.activo).toBe(true);
    // The secret was kept all along and is never shown.
    expect(JSON.stringify(on.body)).not.toMatch(/whsec_/);
  });

  it('takes activo together with the other fields', async () => {
    const c = await createCompany(gw);
    const w = await hook(c.live);
    expect((await api('delete', `/webhooks/${w.id}`, c.live)).status).toBe(200);
    const res = await api('patch', `/webhooks/${w.id}`, c.live, { activo: true, descripcion: 'de vuelta', eventos: ['GUIA_ENTREGADA'] });
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ id: w.id, activo: true, descripcion: 'de vuelta', eventos: ['GUIA_ENTREGADA'] });
  });

  it('400 LIMIT_EXCEEDED when the company already has 10 active (branch webhooks counted); nothing changes', async () => {
    const c = await createCompany(gw, { sucursalesHabilitadas: true });
    const s = await createBranch(gw, c.id);
    const sleeping = await hook(c.live, '/sleeping');
    expect((await api('patch', `/webhooks/${sleeping.id}`, c.live, { activo: false })).status).toBe(200);
    for (let i = 0; i < 2; i++) {
      const res = await gw.admin('post', `/empresas/${c.id}/sucursales/${s.id}/webhooks`, { url: receiver.url(`/s${i}`) });
      expect(res.status).toBe(201);
    }
    for (let i = 0; i < 8; i++) await hook(c.live, `/c${i}`);
    expect(await activeCount(c.id)).toBe(10);

    const refused = await api('patch', `/webhooks/${sleeping.id}`, c.live, { activo: true, descripcion: 'no' });
    expect(refused.status).toBe(400);
    expect(refused.body).toEqual(envelope('LIMIT_EXCEEDED'));
    expect((await api('get', `/webhooks/${sleeping.id}`, c.live)).body.data).toMatchObject({ activo: false, descripcion: null });

    // Deactivating one (by PATCH) frees the slot.
    const [first] = (await api('get', '/webhooks', c.live)).body.data as Array<{ id: string }>;
    expect((await api('patch', `/webhooks/${first!.id}`, c.live, { activo: false })).status).toBe(200);
    expect((await api('patch', `/webhooks/${sleeping.id}`, c.live, { activo: true })).body.data.activo).toBe(true);
    expect(await activeCount(c.id)).toBe(10);
  });

  it('holds the limit under concurrent reactivations: with 9 active, one of two comes back', async () => {
    const c = await createCompany(gw);
    const a = await hook(c.live, '/a');
    const b = await hook(c.live, '/b');
    for (const w of [a, b]) expect((await api('delete', `/webhooks/${w.id}`, c.live)).status).toBe(200);
    for (let i = 0; i < 9; i++) await hook(c.live, `/n${i}`);
    const results = await Promise.all([a, b, a].map((w) => api('patch', `/webhooks/${w.id}`, c.live, { activo: true })));
    // `a` twice: reactivating a webhook already active (by the other call) is no error.
    const codes = results.map((r) => (r.status === 200 ? 'ok' : r.body.error.code));
    expect(codes.filter((x) => x === 'ok').length).toBeGreaterThanOrEqual(1);
    expect(await activeCount(c.id)).toBe(10);
    const active = (await api('get', '/webhooks', c.live)).body.data.map((x: { id: string }) => x.id);
    expect([a.id, b.id].filter((id) => active.includes(id))).toHaveLength(1);
    // Each answer says what happened to its webhook.
    for (const [i, w] of [a, b, a].entries()) {
      const r = results[i]!;
      if (r.status === 200) expect(active).toContain(w.id);
      else expect(r.body).toEqual(envelope('LIMIT_EXCEEDED'));
    }
  });

  it('403 FORBIDDEN for a branch token, 404 for another company, 400 for a non-boolean; creation does not take activo', async () => {
    const c = await createCompany(gw, { sucursalesHabilitadas: true });
    const s = await createBranch(gw, c.id);
    const other = await createCompany(gw);
    const w = await hook(c.live);
    expect((await api('delete', `/webhooks/${w.id}`, c.live)).status).toBe(200);
    const branch = await api('patch', `/webhooks/${w.id}`, s.live, { activo: true });
    expect(branch.status).toBe(403);
    expect(branch.body).toEqual(envelope('FORBIDDEN'));
    expect((await api('patch', `/webhooks/${w.id}`, other.live, { activo: true })).body).toEqual(envelope('NOT_FOUND'));
    for (const activo of ['true', 1, null]) {
      const bad = await api('patch', `/webhooks/${w.id}`, c.live, { activo });
      expect(bad.status).toBe(400);
      expect(bad.body).toEqual(envelope('VALIDATION_ERROR'));
    }
    expect((await api('get', `/webhooks/${w.id}`, c.live)).body.data.activo).toBe(false);
    const created = await api('post', '/webhooks', c.live, { url: receiver.url('/x'), activo: false });
    expect(created.status).toBe(400);
    expect(created.body).toEqual(envelope('VALIDATION_ERROR'));
  });
});
