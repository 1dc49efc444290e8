import type pg from 'pg';
import type { Receiver } from '../../../test/support/https-receiver';
import { bearer, createBranch, createCompany, type Company, type TestGateway, startGatewayFixture, type GatewayFixture } from '../../../test/support/test-gateway';

const envelope = (code: string) => ({ success: false, error: { code, message: expect.any(String) } });

/**
 * Each token sees, changes and PINGs only the webhooks of its own mode; another mode's are 404
 * NOT_FOUND; the limit of 10 active webhooks counts each mode apart (docs/integrators.md, The sandbox).
 */
describe('webhooks per mode: live and test tokens of a company and of a branch', () => {
  let fx: GatewayFixture;
  let gw: TestGateway;
  let pool: pg.Pool;
  let receiver: Receiver;
  let c: Company;
  let branch: Company & { empresaId: string };
  let liveHook: string;
  let testHook: string;
  let branchHook: string;
  let testDelivery: string;
  let liveDelivery: string;

  const api = (method: 'get' | 'post' | 'patch' | 'delete', path: string, token: string, body?: unknown) => {
    const r = gw.http[method](`/api/v1${path}`).set('Authorization', bearer(token));
    return body === undefined ? r : r.send(body as object);
  };
  const create = async (token: string, path: string): Promise<string> => {
    const res = await api('post', '/webhooks', token, { url: receiver.url(path) });
    if (res.status !== 201) throw new Error(`webhook: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body.data.id as string;
  };
  const ids = (res: { body: { data: Array<{ id: string }> } }) => res.body.data.map((w) => w.id).sort();

  beforeAll(async () => {
    fx = await startGatewayFixture('webhooks-sandbox', {
      receiver: true,
      env: { RATE_LIMIT_PER_MINUTE: '100000', DISPATCH_HOST_MAP: 'receiver.test=127.0.0.1', DISPATCH_ALLOW_CIDRS: '127.0.0.0/8' },
    });
    ({ gw, pool } = fx);
    receiver = fx.receiver!;
    c = await createCompany(gw, { sucursalesHabilitadas: true });
    branch = await createBranch(gw, c.id);
    liveHook = await create(c.live, '/live');
    testHook = await create(c.test, '/test');
    const b = await gw.admin('post', `/empresas/${c.id}/sucursales/${branch.id}/webhooks`, { url: receiver.url('/branch') });
    branchHook = b.body.data.id as string;
    // A delivery of each (PINGs are recorded among a webhook's deliveries).
    expect((await api('post', `/webhooks/${testHook}/test`, c.test)).body.data.exitoso).toBe(true);
    expect((await api('post', `/webhooks/${liveHook}/test`, c.live)).body.data.exitoso).toBe(true);
    testDelivery = (await api('get', `/webhooks/${testHook}/entregas`, c.test)).body.data.entregas[0].id as string;
    liveDelivery = (await api('get', `/webhooks/${liveHook}/entregas`, c.live)).body.data.entregas[0].id as string;
  });
  afterAll(() => fx?.stop());

  it('a webhook takes the mode of the token that made it; the internal route makes live branch webhooks', async () => {
    const rows = await pool.query<{ id: string; modo: string }>('select id, modo from webhooks where empresa_id = $1', [c.id]);
    expect(Object.fromEntries(rows.rows.map((r) => [r.id, r.modo]))).toEqual({ [liveHook]: 'live', [testHook]: 'test', [branchHook]: 'live' });
    expect(receiver.requestsTo('/test')[0]!.headers['x-svc-modo']).toBe('test');
    expect(receiver.requestsTo('/live')[0]!.headers['x-svc-modo']).toBe('live');
  });

  it("lists only the token's own mode: the company's and (for a branch token) its branch's", async () => {
    expect(ids(await api('get', '/webhooks', c.live))).toEqual([liveHook, branchHook].sort());
    expect(ids(await api('get', '/webhooks', c.test))).toEqual([testHook]);
    expect(ids(await api('get', '/webhooks', branch.live))).toEqual([liveHook, branchHook].sort());
    expect(ids(await api('get', '/webhooks', branch.test))).toEqual([testHook]);
  });

  it('reads the detail and the delivery log of its own mode; another mode is 404 NOT_FOUND', async () => {
    const reads = (id: string, entrega: string) => [`/webhooks/${id}`, `/webhooks/${id}/entregas`, `/webhooks/${id}/entregas/${entrega}`];
    for (const [token, own, foreign] of [
      [c.live, [liveHook, liveDelivery], [testHook, testDelivery]],
      [branch.live, [liveHook, liveDelivery], [testHook, testDelivery]],
      [c.test, [testHook, testDelivery], [liveHook, liveDelivery]],
      [branch.test, [testHook, testDelivery], [liveHook, liveDelivery]],
    ] as const) {
      for (const path of reads(own[0], own[1])) {
        // The delivery is the company webhook's PING: in a company webhook's log a branch sees no PING
        // (docs/integrators.md, The delivery log), so its detail is 404 to a branch token of either mode.
        const hidden = (token === branch.live || token === branch.test) && path.includes('/entregas/');
        expect({ path, status: (await api('get', path, token)).status }).toEqual({ path, status: hidden ? 404 : 200 });
      }
      for (const path of reads(foreign[0], foreign[1])) {
        const res = await api('get', path, token);
        expect({ path, status: res.status, body: res.body }).toEqual({ path, status: 404, body: envelope('NOT_FOUND') });
      }
    }
    expect((await api('get', `/webhooks/${branchHook}`, branch.test)).status).toBe(404);
  });

  it('changes, deactivates, PINGs, resends, recovers and rotates only its own mode; nothing of the other mode changes', async () => {
    const before = (await pool.query('select * from webhooks where id = any($1::uuid[]) order by id', [[liveHook, testHook]])).rows;
    const pings = { live: receiver.requestsTo('/live').length, test: receiver.requestsTo('/test').length };
    const desde = new Date(Date.now() - 3600_000).toISOString();
    for (const [token, id, entrega] of [
      [c.test, liveHook, liveDelivery],
      [c.live, testHook, testDelivery],
    ] as const) {
      const attempts = [
        api('patch', `/webhooks/${id}`, token, { descripcion: 'cambiado' }),
        api('patch', `/webhooks/${id}`, token, { activo: false }),
        api('delete', `/webhooks/${id}`, token),
        api('post', `/webhooks/${id}/test`, token),
        api('post', `/webhooks/${id}/entregas/${entrega}/reenviar`, token),
        api('post', `/webhooks/${id}/recuperar`, token, { desde }),
        api('post', `/webhooks/${id}/secreto`, token, { solaparHoras: 0 }),
      ];
      for (const res of await Promise.all(attempts)) expect({ status: res.status, body: res.body }).toEqual({ status: 404, body: envelope('NOT_FOUND') });
    }
    const after = (await pool.query('select * from webhooks where id = any($1::uuid[]) order by id', [[liveHook, testHook]])).rows;
    expect(after).toEqual(before);
    expect({ live: receiver.requestsTo('/live').length, test: receiver.requestsTo('/test').length }).toEqual(pings);
    expect(await pool.query('select count(*)::int n from entregas where reenvio_de is not null')).toMatchObject({ rows: [{ n: 0 }] });

    // Its own mode: every operation works.
    expect((await api('patch', `/webhooks/${testHook}`, c.test, { descripcion: 'sandbox' })).body.data).toMatchObject({ id: testHook, descripcion: 'sandbox' });
    expect((await api('post', `/webhooks/${testHook}/entregas/${testDelivery}/reenviar`, c.test)).status).toBe(202);
    expect((await api('post', `/webhooks/${testHook}/recuperar`, c.test, { desde })).status).toBe(202);
    expect((await api('post', `/webhooks/${testHook}/secreto`, c.test, { solaparHoras: 0 })).status).toBe(200);
    // A branch's test token is still only a branch token: head-only operations are 403.
    expect(await api('patch', `/webhooks/${testHook}`, branch.test, { descripcion: 'x' })).toMatchObject({ status: 403, body: envelope('FORBIDDEN') });
    expect(await api('post', '/webhooks', branch.test, { url: receiver.url('/x') })).toMatchObject({ status: 403, body: envelope('FORBIDDEN') });
  });

  it('counts the limit of 10 active webhooks per mode, on creation and on reactivation', async () => {
    const d = await createCompany(gw, { sucursalesHabilitadas: true });
    const s = await createBranch(gw, d.id);
    const live = [await create(d.live, '/l0')];
    // A live branch webhook counts among the live ones.
    live.push((await gw.admin('post', `/empresas/${d.id}/sucursales/${s.id}/webhooks`, { url: receiver.url('/l1') })).body.data.id as string);
    for (let i = 2; i < 10; i++) live.push(await create(d.live, `/l${i}`));
    const test: string[] = [];
    for (let i = 0; i < 10; i++) test.push(await create(d.test, `/t${i}`));
    expect(await api('post', '/webhooks', d.live, { url: receiver.url('/l10') })).toMatchObject({ status: 400, body: envelope('LIMIT_EXCEEDED') });
    expect(await api('post', '/webhooks', d.test, { url: receiver.url('/t10') })).toMatchObject({ status: 400, body: envelope('LIMIT_EXCEEDED') });
    expect(
      await gw.admin('post', `/empresas/${d.id}/sucursales/${s.id}/webhooks`, { url: receiver.url('/l11') }),
    ).toMatchObject({ status: 400, body: envelope('LIMIT_EXCEEDED') });

    // A test slot freed and taken again: reactivating the old one is over the test limit, whatever the live count.
    expect((await api('delete', `/webhooks/${test[0]}`, d.test)).status).toBe(200);
    expect((await api('delete', `/webhooks/${live[0]}`, d.live)).status).toBe(200);
    await create(d.test, '/t11');
    expect(await api('patch', `/webhooks/${test[0]}`, d.test, { activo: true })).toMatchObject({ status: 400, body: envelope('LIMIT_EXCEEDED') });
    // The live one reactivates: 9 live are active, whatever the test count.
    expect((await api('patch', `/webhooks/${live[0]}`, d.live, { activo: true })).body.data).toMatchObject({ activo: true });
    expect(await api('patch', `/webhooks/${live[1]}`, d.test, { activo: true })).toMatchObject({ status: 404, body: envelope('NOT_FOUND') });
    const counts = await pool.query('select modo, count(*)::int n from webhooks where empresa_id = $1 and activo group by modo order by modo', [d.id]);
    expect(counts.rows).toEqual([
      { modo: 'live', n: 10 },
      { modo: 'test', n: 10 },
    ]);
  });
});
