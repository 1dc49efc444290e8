import { verify } from '@svc/webhook-signature';
import { eventually, sleep } from '../../../test/support/eventually';
import type { ReceivedRequest } from '../../../test/support/https-receiver';
import { createOne, moveOn, simulate } from '../../../test/support/shipment-fixtures';
import { verifyStandard } from '../../../test/support/standard-webhooks';
import { createBranch, createCompany, type Company } from '../../../test/support/test-gateway';
import { startDispatcherFixture, type DispatcherFixture } from '../../../test/support/test-dispatcher';
import { createWebhook } from '../../../test/support/webhook-fixtures';

const header = (r: ReceivedRequest, name: string): string | undefined => {
  const v = r.headers[name];
  return Array.isArray(v) ? v.join(', ') : v;
};
const bodyOf = (r: ReceivedRequest) => JSON.parse(r.rawBody.toString('utf8')) as { event: string; data: { numeroGuia: string } };

const ROUTE = ['GUIA_RECOLECTADA', 'GUIA_EN_BODEGA', 'GUIA_EN_RUTA', 'GUIA_ENTREGADA'];
const EVENTS = ['GUIA_CREADA', ...ROUTE];

/**
 * Live events reach live webhooks only, sandbox events test webhooks only, through the same outbox,
 * fan-out and delivery workers, under a mixed stream of both made by the live and test tokens of a
 * company and of its branches (docs/integrators.md, "The sandbox, end to end").
 */
describe('sandbox parity in the fan-out: a mixed stream of live and test events', () => {
  let fx: DispatcherFixture;
  let c: Company;
  let a: Company & { empresaId: string };
  let b: Company & { empresaId: string };
  let other: Company;
  const hooks: Record<string, { id: string; secret: string; modo: 'live' | 'test' }> = {};

  beforeAll(async () => {
    fx = await startDispatcherFixture('sandbox-routing');
    c = await createCompany(fx.gw, { planActivo: true, creditos: 1000, sucursalesHabilitadas: true });
    a = await createBranch(fx.gw, c.id, 'A');
    b = await createBranch(fx.gw, c.id, 'B');
    other = await createCompany(fx.gw, { planActivo: true, creditos: 1000 });
    const make = async (name: string, token: string, modo: 'live' | 'test', eventos: string[] = []) => {
      hooks[name] = { ...(await createWebhook(fx.gw, token, fx.receiver.url(`/${name}`), eventos)), modo };
    };
    await make('live-company', c.live, 'live');
    await make('test-company', c.test, 'test');
    await make('test-entregada', c.test, 'test', ['GUIA_ENTREGADA']);
    await make('other-live', other.live, 'live');
    await make('other-test', other.test, 'test');
    const branchHook = await fx.gw.admin('post', `/empresas/${c.id}/sucursales/${a.id}/webhooks`, { url: fx.receiver.url('/live-branch-a') });
    expect(branchHook.status).toBe(201);
    hooks['live-branch-a'] = { id: branchHook.body.data.id as string, secret: branchHook.body.data.secret as string, modo: 'live' };
  });
  afterAll(() => fx?.stop());

  it('delivers every event to the webhooks of its own mode only, routed by branch, signed and marked X-SVC-Modo', async () => {
    // Per shipment: who creates it, its mode and branch, and how it is moved on (the courier's
    // route for live ones; simular, or the courier's route, for sandbox ones).
    const plan = [
      ...[c, a, b].flatMap((owner) => [0, 1].map(() => ({ token: owner.live, modo: 'live' as const, sucursal: owner === c ? null : owner.id, by: 'courier' }))),
      ...[c, a, b].flatMap((owner) => [
        { token: owner.test, modo: 'test' as const, sucursal: owner === c ? null : owner.id, by: 'simular' },
        { token: owner.test, modo: 'test' as const, sucursal: owner === c ? null : owner.id, by: 'courier' },
      ]),
      // Another company's events of both modes, which none of this company's webhooks may receive.
      { token: other.live, modo: 'live' as const, sucursal: 'other', by: 'courier' },
      { token: other.test, modo: 'test' as const, sucursal: 'other', by: 'simular' },
    ];
    const shipped = await Promise.all(
      plan.map(async (p, i) => {
        const numeroGuia = (await createOne(fx.gw, p.token).expect(201)).body.data.numeroGuia as string;
        // Interleaved: each shipment's moves run alongside every other's.
        await sleep((i % 5) * 7);
        for (const evento of ROUTE) {
          const res = p.by === 'simular' ? await simulate(fx.gw, p.token, numeroGuia, { evento }) : await moveOn(fx.gw, numeroGuia, { evento });
          expect({ numeroGuia, evento, status: res.status }).toEqual({ numeroGuia, evento, status: 200 });
        }
        return { ...p, numeroGuia };
      }),
    );
    const ofCompany = shipped.filter((s) => s.sucursal !== 'other');
    const live = ofCompany.filter((s) => s.modo === 'live');
    const test = ofCompany.filter((s) => s.modo === 'test');
    const liveA = live.filter((s) => s.sucursal === a.id);
    const expected: Record<string, Array<{ numeroGuia: string; evento: string }>> = {
      'live-company': live.flatMap((s) => EVENTS.map((evento) => ({ numeroGuia: s.numeroGuia, evento }))),
      'live-branch-a': liveA.flatMap((s) => EVENTS.map((evento) => ({ numeroGuia: s.numeroGuia, evento }))),
      'test-company': test.flatMap((s) => EVENTS.map((evento) => ({ numeroGuia: s.numeroGuia, evento }))),
      'test-entregada': test.map((s) => ({ numeroGuia: s.numeroGuia, evento: 'GUIA_ENTREGADA' })),
      'other-live': EVENTS.map((evento) => ({ numeroGuia: shipped.find((s) => s.token === other.live)!.numeroGuia, evento })),
      'other-test': EVENTS.map((evento) => ({ numeroGuia: shipped.find((s) => s.token === other.test)!.numeroGuia, evento })),
    };
    const total = Object.values(expected).reduce((n, e) => n + e.length, 0);
    await eventually(async () => fx.receiver.requests.length >= total, 30_000, `${total} deliveries`);
    // Anything more (a live event at a test webhook, or the reverse) would arrive now.
    await sleep(500);
    expect(fx.receiver.requests).toHaveLength(total);

    const modeOf = new Map(shipped.map((s) => [s.numeroGuia, s.modo]));
    for (const [name, want] of Object.entries(expected)) {
      const hook = hooks[name]!;
      const got = fx.receiver.requestsTo(`/${name}`);
      const seen = got.map((r) => ({ numeroGuia: bodyOf(r).data.numeroGuia, evento: bodyOf(r).event }));
      const order = (x: { numeroGuia: string; evento: string }) => `${x.numeroGuia} ${EVENTS.indexOf(x.evento)}`;
      expect({ name, seen: seen.map(order).sort() }).toEqual({ name, seen: want.map(order).sort() });
      for (const r of got) {
        const { numeroGuia } = bodyOf(r).data;
        // The webhook's mode is the event's shipment's mode is the header.
        expect({ name, numeroGuia, shipment: modeOf.get(numeroGuia), header: header(r, 'x-svc-modo') }).toEqual({
          name,
          numeroGuia,
          shipment: hook.modo,
          header: hook.modo,
        });
        expect(header(r, 'x-svc-secuencia')).toBe(String(EVENTS.indexOf(bodyOf(r).event) + 1));
        expect(verify(r.rawBody, r.headers['x-svc-signature'], hook.secret)).toBe(true);
        expect(verifyStandard(r, hook.secret)).toEqual(bodyOf(r));
      }
    }

    // The record agrees: no delivery of an event to a webhook of the other mode, ever.
    const crossed = await fx.pool.query(
      `select count(*)::int n from entregas e join webhooks w on w.id = e.webhook_id join outbox o on o.id = e.evento_id where w.modo <> o.modo`,
    );
    expect(crossed.rows[0].n).toBe(0);
    const byMode = await fx.pool.query(
      `select o.modo, count(*)::int n from entregas e join outbox o on o.id = e.evento_id where o.empresa_id = $1 group by o.modo order by o.modo`,
      [c.id],
    );
    expect(byMode.rows).toEqual([
      { modo: 'live', n: expected['live-company']!.length + expected['live-branch-a']!.length },
      { modo: 'test', n: expected['test-company']!.length + expected['test-entregada']!.length },
    ]);
  });

  it('the reconciler routes a sandbox event it rebuilds from the outbox to the test webhooks only', async () => {
    fx.receiver.reset();
    // An event whose job Redis lost: relayed (so the gateway's sweep leaves it), never fanned out.
    const numeroGuia = (await createOne(fx.gw, c.test).expect(201)).body.data.numeroGuia as string;
    await fx.receiver.waitFor(1, 10_000, '/test-company');
    fx.receiver.reset();
    const eventId = '6f1c7a52-3c3e-4c1e-9a55-2b7d1f0e9a01';
    await fx.pool.query(
      `insert into outbox (id, empresa_id, sucursal_id, evento, data, request_id, secuencia, modo, created_at, enviado_en)
       values ($1, $2, null, 'GUIA_ACTUALIZADA', $3, null, 2, 'test', now() - interval '1 hour', now())`,
      [eventId, c.id, JSON.stringify({ numeroGuia, estado: 'CREADA' })],
    );
    await fx.dispatcher.reconciler.runOnce();
    const [got] = await fx.receiver.waitFor(1, 10_000, '/test-company');
    expect(header(got!, 'x-svc-modo')).toBe('test');
    expect(header(got!, 'webhook-id')).toBe(eventId);
    await sleep(500);
    expect(fx.receiver.requests.map((r) => r.path)).toEqual(['/test-company']);
  });
});
