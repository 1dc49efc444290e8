import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { eventually, sleep } from '../support/eventually';
import { openPortal } from '../support/portal-session';
import { count, guia } from '../support/shipment-fixtures';
import { bearer, createCompany, type Company } from '../support/test-gateway';
import { startDispatcherFixture, type DispatcherFixture } from '../support/test-dispatcher';

const ROOT = join(__dirname, '../..');
const SECRET = /whsec_[A-Za-z0-9+/=]+/;
const NOTICES = ['WEBHOOK_FALLANDO', 'WEBHOOK_DESACTIVADO'];

/** A plain-HTTP receiver on 127.0.0.1 that answers 500 to everything: a laptop's broken handler. */
async function startFailingLocal(): Promise<{ server: Server; url: string; hits: () => number }> {
  let hits = 0;
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      hits++;
      res.statusCode = 500;
      res.end('local failure');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, hits: () => hits };
}

function svc(args: string[]): { child: ChildProcess; lines: string[]; exited: Promise<number | null> } {
  const child = spawn(process.execPath, ['--import', 'tsx', 'packages/cli/src/main.ts', ...args], { cwd: ROOT, env: process.env, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  const take = (chunk: Buffer): void => void lines.push(...chunk.toString('utf8').split('\n').filter((l) => l.length > 0));
  child.stdout!.on('data', take);
  child.stderr!.on('data', take);
  return { child, lines, exited: new Promise((resolve) => child.on('exit', (code) => resolve(code))) };
}

/**
 * A listening session is never judged by the endpoint-health rules (extensions.md): its failures are
 * a laptop's receiver's. Caused for real: a session whose local receiver answers 500 to every
 * attempt, beside a test webhook failing the same way, under a window of under two seconds. The
 * webhook is deactivated (the rule had its chance); the session stays open, is the subject of no
 * notice, is absent from Resumen's Webhooks con problemas, and a session cannot subscribe to notices.
 */
describe('listening sessions and endpoint health (WEBHOOK_DISABLE_AFTER_HOURS=0.0005, MIN_FAILURES=2)', () => {
  let fx: DispatcherFixture;
  let c: Company;
  let local: Awaited<ReturnType<typeof startFailingLocal>>;
  let cli: ReturnType<typeof svc> | undefined;

  beforeAll(async () => {
    fx = await startDispatcherFixture('listen-health', { dispatcher: { env: { WEBHOOK_DISABLE_AFTER_HOURS: '0.0005', WEBHOOK_DISABLE_MIN_FAILURES: '2' } } });
    c = await createCompany(fx.gw, { planActivo: true, creditos: 1000 });
    local = await startFailingLocal();
  }, 60_000);
  afterAll(async () => {
    cli?.child.kill('SIGKILL');
    await new Promise<void>((resolve) => local?.server.close(() => resolve()));
    await fx?.stop();
  });

  const api = (method: 'get' | 'post', path: string, body?: unknown) => {
    const r = fx.gw.http[method](`/api/v1${path}`).set('Authorization', bearer(c.test));
    return body === undefined ? r : r.send(body as object);
  };
  const active = async (id: string): Promise<boolean> => (await fx.pool.query<{ activo: boolean }>('select activo from webhooks where id = $1', [id])).rows[0]!.activo;

  it('a session whose receiver answers 500 is never deactivated, never a notice\'s subject, never in Webhooks con problemas', async () => {
    fx.receiver.respond('/dead', { status: 500 });
    const dead = (await api('post', '/webhooks', { url: fx.receiver.url('/dead'), eventos: ['GUIA_CREADA'] }).expect(201)).body.data as { id: string };
    await api('post', '/webhooks', { url: fx.receiver.url('/watcher'), eventos: NOTICES }).expect(201);

    cli = svc(['listen', '--forward-to', local.url, '--events', 'GUIA_CREADA', '--token', c.test, '--api', `http://127.0.0.1:${fx.gw.port}`]);
    await eventually(async () => cli!.lines.some((l) => SECRET.test(l)), 20_000, `svc listen printing its secret (got: ${cli.lines.join(' | ')})`);
    const sessionId = /session ([0-9a-f-]{36})/.exec(cli.lines.find((l) => SECRET.test(l))!)![1]!;

    // Sandbox traffic until the failing webhook is deactivated, then more, so the session's own
    // failures run well past the window and beyond the minimum.
    const until = Date.now() + 40_000;
    while (await active(dead.id)) {
      if (Date.now() > until) throw new Error('the failing test webhook was never deactivated: the rule did not run');
      await api('post', '/guias', guia()).expect(201);
      await sleep(500);
    }
    for (let i = 0; i < 3; i++) {
      await api('post', '/guias', guia()).expect(201);
      await sleep(700);
    }
    // Every delivery to the session ended failed, after its three attempts at the local receiver.
    await eventually(
      async () => (await count(fx.pool, `select count(*) as n from entregas where webhook_id = $1 and estado <> 'fallida'`, [sessionId])) === 0,
      15_000,
      'every session delivery ended',
    );
    const failed = await count(fx.pool, `select count(*) as n from entregas where webhook_id = $1 and estado = 'fallida' and intentos = 3`, [sessionId]);
    expect(failed).toBeGreaterThanOrEqual(4);
    expect(local.hits()).toBeGreaterThanOrEqual(failed * 3);
    await sleep(500); // the health's batch (100 ms) and any notice it would queue

    // The session: open, its row's health untouched, in the list, its stream still forwarding.
    expect(await active(sessionId)).toBe(true);
    const row = (await fx.pool.query<{ salud_fallas: number; desactivado_por: string | null }>('select salud_fallas, desactivado_por from webhooks where id = $1', [sessionId])).rows[0]!;
    expect(row).toEqual({ salud_fallas: 0, desactivado_por: null });
    expect(((await api('get', '/escuchas').expect(200)).body.data as Array<{ id: string }>).map((s) => s.id)).toEqual([sessionId]);

    // Notices: about the webhook, none about the session, none to the session.
    await fx.receiver.waitFor(2, 15_000, '/watcher');
    const about = fx.receiver.requestsTo('/watcher').map((r) => (JSON.parse(r.rawBody.toString('utf8')) as { event: string; data: { webhook: { id: string } } }));
    expect(about.map((n) => n.event)).toEqual(NOTICES);
    expect(new Set(about.map((n) => n.data.webhook.id))).toEqual(new Set([dead.id]));
    expect(await count(fx.pool, `select count(*) as n from entregas where webhook_id = $1 and evento like 'WEBHOOK_%'`, [sessionId])).toBe(0);
    expect(await count(fx.pool, `select count(*) as n from actividad where webhook_id = $1`, [sessionId])).toBe(0);

    // Resumen: the deactivated webhook is a problem; the session is no webhook of the company's.
    const portal = await openPortal(fx.gw, c.id);
    const problems = ((await portal.get('/resumen')).body.data as { webhooksConProblemas: Array<{ id: string }> }).webhooksConProblemas.map((w) => w.id);
    expect(problems).toEqual([dead.id]);
    // The Sandbox page's list shows it with its failed deliveries.
    const sessions = (await portal.get('/sandbox/escuchas')).body.data as Array<{ id: string; entregas: Array<{ evento: string; exitoso: boolean; intentos: number; statusCode: number }> }>;
    expect(sessions.map((s) => s.id)).toEqual([sessionId]);
    expect(sessions[0]!.entregas.length).toBeGreaterThanOrEqual(4);
    expect(sessions[0]!.entregas[0]).toMatchObject({ evento: 'GUIA_CREADA', exitoso: false, intentos: 3, statusCode: 500 });

    cli.child.kill('SIGINT');
    expect(await cli.exited).toBe(0);
  }, 90_000);

  it('a session cannot list a notice in --events: the API refuses it and svc listen exits non-zero', async () => {
    const refused = svc(['listen', '--forward-to', local.url, '--events', 'WEBHOOK_FALLANDO', '--token', c.test, '--api', `http://127.0.0.1:${fx.gw.port}`]);
    expect(await refused.exited).toBe(1);
    expect(refused.lines.join('\n')).toMatch(/400 VALIDATION_ERROR/);
    expect((await api('post', '/escuchas', { eventos: ['WEBHOOK_DESACTIVADO'] })).status).toBe(400);
  }, 30_000);
});
