import type pg from 'pg';
import {
  bearer,
  createBranch,
  createCompany,
  type Company,
  type TestGateway,
  startGatewayFixture,
  type GatewayFixture,
} from '../../../test/support/test-gateway';

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const envelope = (code: string) => ({ success: false, error: { code, message: expect.any(String) } });
const HOOK = 'https://receiver.test:8443/hook';

describe('webhook operations', () => {
  let fx: GatewayFixture;
  let gw: TestGateway;
  let pool: pg.Pool;

  beforeAll(async () => {
    fx = await startGatewayFixture('webhooks', { env: { RATE_LIMIT_PER_MINUTE: '100000' } });
    ({ gw, pool } = fx);
  });
  afterAll(() => fx?.stop());

  const api = (method: 'get' | 'post' | 'patch' | 'delete', path: string, token: string, body?: unknown) => {
    const r = gw.http[method](`/api/v1${path}`).set('Authorization', bearer(token));
    return body === undefined ? r : r.send(body as object);
  };
  const create = (token: string, body: Record<string, unknown> = { url: HOOK }) => api('post', '/webhooks', token, body);
  const createForBranch = (empresaId: string, sucursalId: string, body: Record<string, unknown> = { url: HOOK }) =>
    gw.admin('post', `/empresas/${empresaId}/sucursales/${sucursalId}/webhooks`, body);
  const idOf = (res: { status: number; body: { data?: { id?: string } } }): string => {
    if (res.status !== 201 || !res.body.data?.id) throw new Error(`webhook not created: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body.data.id;
  };

  describe('POST /api/v1/webhooks', () => {
    it('answers 201 with exactly id, url, secret, eventos, descripcion, createdAt and nota', async () => {
      const c = await createCompany(gw);
      const res = await create(c.live, { url: HOOK, eventos: ['GUIA_CREADA', 'GUIA_ENTREGADA'], descripcion: 'ERP central' });
      expect(res.status).toBe(201);
      expect(res.body).toEqual({
        success: true,
        data: {
          id: expect.stringMatching(UUID),
          url: HOOK,
          // Standard Webhooks' form: whsec_ + base64 of 32 random bytes.
          secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/),
          eventos: ['GUIA_CREADA', 'GUIA_ENTREGADA'],
          descripcion: 'ERP central',
          createdAt: expect.stringMatching(ISO),
          nota: expect.stringMatching(/secreto/i),
        },
      });
      const secret = res.body.data.secret as string;
      expect(Buffer.from(secret.slice('whsec_'.length), 'base64')).toHaveLength(32);
      expect(Buffer.from(secret.slice('whsec_'.length), 'base64').toString('base64')).toBe(secret.slice('whsec_'.length));
      // Stored sealed (v1:<keyId>:...), never as shown: it opens to the secret of the answer.
      const row = await pool.query('select empresa_id, sucursal_id, secret, activo from webhooks where id = $1', [res.body.data.id]);
      expect(row.rows[0]).toEqual({ empresa_id: c.id, sucursal_id: null, secret: expect.stringMatching(/^v1:[0-9a-f]{8}:/), activo: true });
      expect(row.rows[0].secret).not.toContain(secret.slice('whsec_'.length));
      expect(gw.deps.secrets.open(res.body.data.id as string, row.rows[0].secret as string)).toBe(secret);
    });

    it('defaults eventos to [] (all events) and descripcion to null; every secret differs', async () => {
      const c = await createCompany(gw);
      const a = await create(c.live);
      const b = await create(c.live, { url: `${HOOK}/b`, eventos: [], descripcion: null });
      for (const res of [a, b]) {
        expect(res.status).toBe(201);
        expect(res.body.data.eventos).toEqual([]);
        expect(res.body.data.descripcion).toBeNull();
      }
      expect(a.body.data.secret).not.toBe(b.body.data.secret);
    });

    it('with the test token makes a test webhook: the test token sees it, the live token does not', async () => {
      const c = await createCompany(gw);
      const id = idOf(await create(c.test, { url: HOOK, descripcion: 'desde sandbox' }));
      expect((await pool.query('select modo from webhooks where id = $1', [id])).rows[0].modo).toBe('test');
      expect((await api('get', '/webhooks', c.live)).body.data).toEqual([]);
      expect((await api('get', '/webhooks', c.test)).body.data.map((w: { id: string }) => w.id)).toEqual([id]);
      expect((await api('get', `/webhooks/${id}`, c.test)).status).toBe(200);
      expect(await api('get', `/webhooks/${id}`, c.live)).toMatchObject({ status: 404, body: envelope('NOT_FOUND') });
    });

    it.each([
      ['no url', { eventos: [] }, 'url'],
      ['a url that is not a string', { url: 42 }, 'url'],
      ['eventos not an array', { url: HOOK, eventos: 'GUIA_CREADA' }, 'eventos'],
      ['PING among eventos', { url: HOOK, eventos: ['PING'] }, 'eventos[0]'],
      ['an unknown event', { url: HOOK, eventos: ['GUIA_CREADA', 'GUIA_PERDIDA'] }, 'eventos[1]'],
      ['a repeated event', { url: HOOK, eventos: ['GUIA_CREADA', 'GUIA_CREADA'] }, 'eventos'],
      ['descripcion of 201 characters', { url: HOOK, descripcion: 'x'.repeat(201) }, 'descripcion'],
      ['an unknown field', { url: HOOK, secret: 'mine' }, 'secret'],
    ])('400 VALIDATION_ERROR for %s, naming the field', async (_name, body, field) => {
      const c = await createCompany(gw);
      const res = await create(c.live, body);
      expect(res.status).toBe(400);
      expect(res.body).toEqual(envelope('VALIDATION_ERROR'));
      expect(res.body.error.message).toContain(field);
      expect(Number((await pool.query('select count(*) from webhooks where empresa_id = $1', [c.id])).rows[0].count)).toBe(0);
    });

    it('accepts a descripcion of exactly 200 characters', async () => {
      const c = await createCompany(gw);
      const res = await create(c.live, { url: HOOK, descripcion: 'd'.repeat(200) });
      expect(res.status).toBe(201);
      expect(res.body.data.descripcion).toHaveLength(200);
    });

    it.each([
      'http://receiver.test/hook',
      'ftp://receiver.test/hook',
      'receiver.test/hook',
      'https://localhost/hook',
      'https://api.localhost/hook',
      'https://127.0.0.1/hook',
      'https://10.1.2.3/hook',
      'https://172.16.0.1/hook',
      'https://172.31.255.255/hook',
      'https://192.168.1.10/hook',
      'https://2130706433/hook',
      'https://0x7f.1/hook',
      'https://017700000001/hook',
      'https://[::1]/hook',
      'https://[fd00::1]/hook',
      'https://[::ffff:10.0.0.1]/hook',
      'https://user:pass@receiver.test/hook',
    ])('400 INVALID_URL for %s', async (url) => {
      const c = await createCompany(gw);
      const res = await create(c.live, { url });
      expect(res.status).toBe(400);
      expect(res.body).toEqual(envelope('INVALID_URL'));
    });

    it('400 LIMIT_EXCEEDED at the 11th active webhook, counting branch webhooks; a deactivation frees a slot', async () => {
      const c = await createCompany(gw, { sucursalesHabilitadas: true });
      const s = await createBranch(gw, c.id);
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) ids.push(idOf(await createForBranch(c.id, s.id, { url: `${HOOK}/s${i}` })));
      for (let i = 0; i < 7; i++) ids.push(idOf(await create(c.live, { url: `${HOOK}/c${i}` })));

      const refused = await create(c.live, { url: `${HOOK}/extra` });
      expect(refused.status).toBe(400);
      expect(refused.body).toEqual(envelope('LIMIT_EXCEEDED'));
      const refusedBranch = await createForBranch(c.id, s.id, { url: `${HOOK}/extra` });
      expect(refusedBranch.status).toBe(400);
      expect(refusedBranch.body).toEqual(envelope('LIMIT_EXCEEDED'));

      // An inactive webhook does not count.
      expect((await api('delete', `/webhooks/${ids[0]}`, c.live)).status).toBe(200);
      expect((await create(c.live, { url: `${HOOK}/again` })).status).toBe(201);
      expect((await create(c.live, { url: `${HOOK}/too-many` })).status).toBe(400);
    });

    it('holds the limit under concurrent creations: exactly 10 of 16 succeed', async () => {
      const c = await createCompany(gw);
      const results = await Promise.all(Array.from({ length: 16 }, (_, i) => create(c.live, { url: `${HOOK}/${i}` })));
      expect(results.filter((r) => r.status === 201)).toHaveLength(10);
      expect(results.filter((r) => r.status === 400 && r.body.error.code === 'LIMIT_EXCEEDED')).toHaveLength(6);
      const n = await pool.query('select count(*) from webhooks where empresa_id = $1 and activo', [c.id]);
      expect(Number(n.rows[0].count)).toBe(10);
    });
  });

  describe('reading: the secret is never returned again', () => {
    it('GET list items carry exactly id, url, eventos, descripcion, createdAt, ultimoDelivery', async () => {
      const c = await createCompany(gw);
      const created = await create(c.live, { url: HOOK, eventos: ['GUIA_EN_RUTA'], descripcion: 'rutas' });
      const second = await create(c.live, { url: `${HOOK}/2` });
      const res = await api('get', '/webhooks', c.live);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        success: true,
        data: [
          {
            id: created.body.data.id,
            url: HOOK,
            eventos: ['GUIA_EN_RUTA'],
            descripcion: 'rutas',
            createdAt: created.body.data.createdAt,
            ultimoDelivery: null,
          },
          {
            id: second.body.data.id,
            url: `${HOOK}/2`,
            eventos: [],
            descripcion: null,
            createdAt: second.body.data.createdAt,
            ultimoDelivery: null,
          },
        ],
      });
      expect(JSON.stringify(res.body)).not.toContain(created.body.data.secret);
    });

    it('GET detail carries exactly id, url, eventos, descripcion, activo, createdAt, entregas', async () => {
      const c = await createCompany(gw);
      const created = await create(c.live, { url: HOOK, descripcion: 'detalle' });
      const res = await api('get', `/webhooks/${created.body.data.id}`, c.live);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        success: true,
        data: {
          id: created.body.data.id,
          url: HOOK,
          eventos: [],
          descripcion: 'detalle',
          activo: true,
          createdAt: created.body.data.createdAt,
          entregas: [],
        },
      });
      expect(JSON.stringify(res.body)).not.toContain(created.body.data.secret);
    });

    it('shows the last-20 window of entregas, newest first, with exactly the delivery fields', async () => {
      const c = await createCompany(gw);
      const id = idOf(await create(c.live));
      // 23 deliveries, one per second of age, so "newest" is unambiguous.
      const rows = await pool.query<{ id: string }>(
        `insert into entregas (id, webhook_id, evento_id, evento, estado, exitoso, status_code, intentos, ultimo_intento_en, created_at)
         select gen_random_uuid(), $1, gen_random_uuid(), 'GUIA_CREADA',
                case when i % 2 = 0 then 'exitosa' else 'fallida' end, i % 2 = 0,
                case when i % 2 = 0 then 200 else 500 end, case when i % 2 = 0 then 1 else 3 end,
                now() - make_interval(secs => 23 - i) + interval '100 ms', now() - make_interval(secs => 23 - i)
         from generate_series(1, 23) as i
         returning id`,
        [id],
      );
      const inserted = rows.rows.map((r) => r.id);
      const res = await api('get', `/webhooks/${id}`, c.live);
      const entregas = res.body.data.entregas as Array<Record<string, unknown>>;
      expect(entregas).toHaveLength(20);
      expect(entregas.map((e) => e.id)).toEqual(inserted.slice(3).reverse());
      expect(entregas[0]).toEqual({
        id: inserted[22],
        evento: 'GUIA_CREADA',
        exitoso: false,
        statusCode: 500,
        intentos: 3,
        ultimoIntentoEn: expect.stringMatching(ISO),
        createdAt: expect.stringMatching(ISO),
      });
      expect(entregas[1]).toMatchObject({ exitoso: true, statusCode: 200, intentos: 1 });
      // The list shows the latest attempted delivery.
      const list = await api('get', '/webhooks', c.live);
      expect(list.body.data[0].ultimoDelivery).toEqual({ exitoso: false, statusCode: 500, fecha: entregas[0]!.ultimoIntentoEn });
    });

    it('leaves out deliveries not attempted yet: every item has intentos 1 to 3 and an ultimoIntentoEn', async () => {
      const c = await createCompany(gw);
      const id = idOf(await create(c.live));
      const attempted = await pool.query<{ id: string }>(
        `insert into entregas (id, webhook_id, evento_id, evento, estado, exitoso, status_code, intentos, ultimo_intento_en, created_at)
         values (gen_random_uuid(), $1, gen_random_uuid(), 'GUIA_CREADA', 'pendiente', false, 503, 1, now() - interval '2 s', now() - interval '2 s')
         returning id`,
        [id],
      );
      // Newer, but queued and never tried (or ended untried when its webhook was deactivated).
      await pool.query(
        `insert into entregas (id, webhook_id, evento_id, evento, estado, created_at)
         values (gen_random_uuid(), $1, gen_random_uuid(), 'GUIA_RECOLECTADA', 'pendiente', now()),
                (gen_random_uuid(), $1, gen_random_uuid(), 'GUIA_EN_BODEGA', 'fallida', now())`,
        [id],
      );
      const res = await api('get', `/webhooks/${id}`, c.live);
      expect(res.body.data.entregas).toEqual([
        {
          id: attempted.rows[0]!.id,
          evento: 'GUIA_CREADA',
          exitoso: false,
          statusCode: 503,
          intentos: 1,
          ultimoIntentoEn: expect.stringMatching(ISO),
          createdAt: expect.stringMatching(ISO),
        },
      ]);
    });
  });

  describe('PATCH /api/v1/webhooks/:id', () => {
    it('updates the fields given, replaces eventos, and answers exactly id, url, eventos, descripcion, activo, createdAt', async () => {
      const c = await createCompany(gw);
      const created = await create(c.live, { url: HOOK, eventos: ['GUIA_CREADA', 'GUIA_EN_RUTA'], descripcion: 'antes' });
      const id = created.body.data.id as string;

      const res = await api('patch', `/webhooks/${id}`, c.live, { eventos: ['GUIA_ENTREGADA'] });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        success: true,
        data: { id, url: HOOK, eventos: ['GUIA_ENTREGADA'], descripcion: 'antes', activo: true, createdAt: created.body.data.createdAt },
      });

      const res2 = await api('patch', `/webhooks/${id}`, c.live, { url: 'https://other.test/nuevo', descripcion: null, eventos: [] });
      expect(res2.status).toBe(200);
      expect(res2.body.data).toEqual({
        id,
        url: 'https://other.test/nuevo',
        eventos: [],
        descripcion: null,
        activo: true,
        createdAt: created.body.data.createdAt,
      });
      expect(JSON.stringify(res2.body)).not.toContain(created.body.data.secret);
      // The secret is untouched by the patch: stored sealed, it still opens to the one shown at creation.
      const row = await pool.query<{ secret: string }>('select secret from webhooks where id = $1', [id]);
      expect(row.rows[0]!.secret).toMatch(/^v1:[0-9a-f]{8}:/);
      expect(gw.deps.secrets.open(id, row.rows[0]!.secret)).toBe(created.body.data.secret);
    });

    it('400 VALIDATION_ERROR for an empty body or a bad field; 400 INVALID_URL for a bad url; nothing changes', async () => {
      const c = await createCompany(gw);
      const id = idOf(await create(c.live, { url: HOOK, eventos: ['GUIA_CREADA'] }));
      const empty = await api('patch', `/webhooks/${id}`, c.live, {});
      expect(empty.status).toBe(400);
      expect(empty.body).toEqual(envelope('VALIDATION_ERROR'));
      const long = await api('patch', `/webhooks/${id}`, c.live, { descripcion: 'x'.repeat(201) });
      expect(long.body).toEqual(envelope('VALIDATION_ERROR'));
      const ping = await api('patch', `/webhooks/${id}`, c.live, { eventos: ['PING'] });
      expect(ping.body).toEqual(envelope('VALIDATION_ERROR'));
      for (const url of ['http://receiver.test/x', 'https://192.168.0.1/x', 'https://0x7f.1/x', 'https://[::1]/x']) {
        const bad = await api('patch', `/webhooks/${id}`, c.live, { url });
        expect(bad.status).toBe(400);
        expect(bad.body).toEqual(envelope('INVALID_URL'));
      }
      const detail = await api('get', `/webhooks/${id}`, c.live);
      expect(detail.body.data).toMatchObject({ url: HOOK, eventos: ['GUIA_CREADA'], descripcion: null });
    });
  });

  describe('DELETE /api/v1/webhooks/:id', () => {
    it('deactivates softly, answering { id, activo: false }; the second time 409 ALREADY_INACTIVE', async () => {
      const c = await createCompany(gw);
      const id = idOf(await create(c.live));
      await pool.query(
        `insert into entregas (id, webhook_id, evento, estado, intentos, ultimo_intento_en) values (gen_random_uuid(), $1, 'PING', 'exitosa', 1, now())`,
        [id],
      );
      const res = await api('delete', `/webhooks/${id}`, c.live);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ success: true, data: { id, activo: false } });

      const again = await api('delete', `/webhooks/${id}`, c.live);
      expect(again.status).toBe(409);
      expect(again.body).toEqual(envelope('ALREADY_INACTIVE'));

      // Gone from the list, still readable with its history.
      expect((await api('get', '/webhooks', c.live)).body.data).toEqual([]);
      const detail = await api('get', `/webhooks/${id}`, c.live);
      expect(detail.status).toBe(200);
      expect(detail.body.data.activo).toBe(false);
      expect(detail.body.data.entregas).toHaveLength(1);
    });
  });

  describe('who may see and change what', () => {
    let c: Company;
    let other: Company;
    let branch: Company;
    let otherBranch: Company;
    let companyHook: string;
    let branchHook: string;
    let otherBranchHook: string;
    let otherCompanyHook: string;

    beforeAll(async () => {
      c = await createCompany(gw, { sucursalesHabilitadas: true });
      branch = await createBranch(gw, c.id, 'Norte');
      otherBranch = await createBranch(gw, c.id, 'Sur');
      other = await createCompany(gw);
      companyHook = idOf(await create(c.live, { url: `${HOOK}/empresa` }));
      branchHook = idOf(await createForBranch(c.id, branch.id, { url: `${HOOK}/norte` }));
      otherBranchHook = idOf(await createForBranch(c.id, otherBranch.id, { url: `${HOOK}/sur` }));
      otherCompanyHook = idOf(await create(other.live, { url: `${HOOK}/otra` }));
    });

    it('the internal route creates a branch webhook with the creation answer (secret once)', async () => {
      const res = await createForBranch(c.id, branch.id, { url: `${HOOK}/norte2`, eventos: ['GUIA_CREADA'], descripcion: 'norte' });
      expect(res.status).toBe(201);
      expect(Object.keys(res.body.data).sort()).toEqual(['createdAt', 'descripcion', 'eventos', 'id', 'nota', 'secret', 'url']);
      expect(res.body.data.secret).toMatch(/^whsec_/);
      const row = await pool.query('select sucursal_id, modo from webhooks where id = $1', [res.body.data.id]);
      expect(row.rows[0]).toEqual({ sucursal_id: branch.id, modo: 'live' });
      expect((await api('delete', `/webhooks/${res.body.data.id}`, c.live)).status).toBe(200);
    });

    it('the internal route: 404 for an unknown company or a branch of another company, 401 without the admin token, 400 for a bad body', async () => {
      expect((await createForBranch('00000000-0000-4000-8000-000000000000', branch.id)).status).toBe(404);
      expect((await createForBranch(other.id, branch.id)).status).toBe(404);
      expect((await createForBranch(c.id, 'not-a-uuid')).status).toBe(404);
      const bad = await createForBranch(c.id, branch.id, { url: 'http://receiver.test/x' });
      expect(bad.body).toEqual(envelope('INVALID_URL'));
      const noAdmin = await gw.http.post(`/internal/v1/empresas/${c.id}/sucursales/${branch.id}/webhooks`).send({ url: HOOK });
      expect(noAdmin.status).toBe(401);
    });

    it('the company token lists every active webhook of the company, its branches included', async () => {
      const res = await api('get', '/webhooks', c.live);
      expect(res.body.data.map((w: { id: string }) => w.id).sort()).toEqual([companyHook, branchHook, otherBranchHook].sort());
    });

    it('a branch token lists and reads the company webhooks and its own branch ones, no other branch', async () => {
      const res = await api('get', '/webhooks', branch.live);
      expect(res.status).toBe(200);
      expect(res.body.data.map((w: { id: string }) => w.id).sort()).toEqual([companyHook, branchHook].sort());
      expect((await api('get', `/webhooks/${companyHook}`, branch.live)).status).toBe(200);
      // A branch webhook from the internal route is live: the branch's test token does not see it.
      expect((await api('get', `/webhooks/${branchHook}`, branch.test)).status).toBe(404);
      const hidden = await api('get', `/webhooks/${otherBranchHook}`, branch.live);
      expect(hidden.status).toBe(404);
      expect(hidden.body).toEqual(envelope('NOT_FOUND'));
    });

    it('a branch token gets 403 FORBIDDEN on create, update, deactivate and test', async () => {
      const attempts = [
        create(branch.live),
        api('patch', `/webhooks/${branchHook}`, branch.live, { descripcion: 'x' }),
        api('delete', `/webhooks/${branchHook}`, branch.live),
        api('post', `/webhooks/${branchHook}/test`, branch.live),
        api('post', `/webhooks/${companyHook}/test`, branch.test),
      ];
      for (const res of await Promise.all(attempts)) {
        expect(res.status).toBe(403);
        expect(res.body).toEqual(envelope('FORBIDDEN'));
      }
      const detail = await api('get', `/webhooks/${branchHook}`, c.live);
      expect(detail.body.data).toMatchObject({ activo: true, descripcion: null });
    });

    it("404 NOT_FOUND for another company's webhook, an unknown id and a malformed id, on every operation", async () => {
      for (const id of [otherCompanyHook, '00000000-0000-4000-8000-000000000000', 'not-a-uuid', '1']) {
        const results = await Promise.all([
          api('get', `/webhooks/${id}`, c.live),
          api('patch', `/webhooks/${id}`, c.live, { descripcion: 'x' }),
          api('delete', `/webhooks/${id}`, c.live),
          api('post', `/webhooks/${id}/test`, c.live),
        ]);
        for (const res of results) {
          expect(res.status).toBe(404);
          expect(res.body).toEqual(envelope('NOT_FOUND'));
        }
      }
      const intact = await api('get', `/webhooks/${otherCompanyHook}`, other.live);
      expect(intact.body.data).toMatchObject({ activo: true, descripcion: null });
    });

    it('405 for another method on a webhook path', async () => {
      const res = await gw.http.put(`/api/v1/webhooks/${companyHook}`).set('Authorization', bearer(c.live)).send({});
      expect(res.status).toBe(405);
      expect(res.body).toEqual(envelope('METHOD_NOT_ALLOWED'));
    });
  });
});
