import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { verify } from '@svc/webhook-signature';
import { eventually, sleep } from '../support/eventually';
import { freePort } from '../support/free-port';
import { count, createOne, moveOn } from '../support/shipment-fixtures';
import { verifyStandard } from '../support/standard-webhooks';
import { createCompany, type Company, type TestGateway } from '../support/test-gateway';
import { startDispatcherFixture, type DispatcherFixture } from '../support/test-dispatcher';

const ROOT = join(__dirname, '../..');
const ROUTE = ['GUIA_CREADA', 'GUIA_RECOLECTADA', 'GUIA_EN_BODEGA', 'GUIA_EN_RUTA', 'GUIA_ENTREGADA'];
const SECRET = /whsec_[A-Za-z0-9+/=]+/;

interface Hit {
  path: string;
  at: number;
  headers: IncomingHttpHeaders;
  rawBody: Buffer;
  body: { event: string; data: { numeroGuia?: string } };
}

/** A plain-HTTP receiver on 127.0.0.1, as an integrator's under development: 500 on paths starting /fail. */
async function startLocalReceiver(): Promise<{ server: Server; url: (path: string) => string; hits: Hit[] }> {
  const hits: Hit[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const rawBody = Buffer.concat(chunks);
      hits.push({ path: req.url ?? '', at: Date.now(), headers: req.headers, rawBody, body: JSON.parse(rawBody.toString('utf8')) as Hit['body'] });
      res.statusCode = req.url?.startsWith('/fail') ? 500 : 200;
      res.end(req.url?.startsWith('/fail') ? 'local failure' : 'ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { server, hits, url: (path) => `http://127.0.0.1:${port}${path}` };
}

interface Cli {
  child: ChildProcess;
  lines: string[];
  exited: Promise<number | null>;
}

/** `svc ...` as a child process, exactly as `pnpm svc` runs it. */
function svc(args: string[], env: Record<string, string> = {}): Cli {
  const child = spawn(process.execPath, ['--import', 'tsx', 'packages/cli/src/main.ts', ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  const take = (chunk: Buffer): void => void lines.push(...chunk.toString('utf8').split('\n').filter((l) => l.length > 0));
  child.stdout!.on('data', take);
  child.stderr!.on('data', take);
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, lines, exited };
}

const api = (gw: TestGateway): string => `http://127.0.0.1:${gw.port}`;

async function listenOn(gw: TestGateway, token: string, forwardTo: string, extra: string[] = []): Promise<Cli & { secret: string; sessionId: string }> {
  const cli = svc(['listen', '--forward-to', forwardTo, '--token', token, '--api', api(gw), ...extra]);
  await eventually(async () => cli.lines.some((l) => SECRET.test(l)), 20_000, `svc listen printing its secret (got: ${cli.lines.join(' | ')})`);
  const line = cli.lines.find((l) => SECRET.test(l))!;
  // Ready once the stream is held: the session's lease is then a stream's (holder 1).
  const sessionId = /session ([0-9a-f-]{36})/.exec(line)![1]!;
  return { ...cli, secret: SECRET.exec(line)![0], sessionId };
}

async function triggerVia(gw: TestGateway, token: string, evento: string): Promise<string> {
  const cli = svc(['trigger', evento, '--token', token, '--api', api(gw)]);
  const code = await cli.exited;
  expect({ code, lines: cli.lines }).toEqual({ code: 0, lines: expect.any(Array) as unknown });
  return cli.lines[cli.lines.length - 1]!;
}

/**
 * Issue 40's done-when: `svc listen` against a plain-HTTP receiver on 127.0.0.1, then `svc trigger`,
 * with two gateways and two dispatchers on one database and Redis prefix: the stream is held by
 * one gateway, the events are made through the other, and either dispatcher makes the attempts.
 */
describe('svc listen and svc trigger, across two gateways and two dispatchers', () => {
  let fx: DispatcherFixture;
  let gw2: TestGateway;
  let c: Company;
  let local: Awaited<ReturnType<typeof startLocalReceiver>>;
  const clis: Cli[] = [];

  beforeAll(async () => {
    fx = await startDispatcherFixture('listen', { dispatchers: 2 });
    gw2 = await fx.addGateway();
    c = await createCompany(fx.gw, { planActivo: true, creditos: 1000 });
    local = await startLocalReceiver();
  }, 60_000);
  afterAll(async () => {
    for (const cli of clis) cli.child.kill('SIGKILL');
    await new Promise<void>((resolve) => local?.server.close(() => resolve()));
    await fx?.stop();
  });

  it('forwards GUIA_CREADA..GUIA_ENTREGADA in order (X-SVC-Secuencia 1..5), each verified with the printed secret, and records them', async () => {
    const cli = await listenOn(fx.gw, c.test, local.url('/hook'));
    clis.push(cli);
    const started = Date.now();
    const numeroGuia = await triggerVia(gw2, c.test, 'GUIA_ENTREGADA');
    expect(numeroGuia).toMatch(/^SVC/);

    const ofGuia = (): Hit[] => local.hits.filter((h) => h.path === '/hook' && h.body.data.numeroGuia === numeroGuia);
    await eventually(async () => ofGuia().length >= ROUTE.length, 15_000, 'five events at the local receiver');
    const hits = ofGuia();
    expect(hits.map((h) => h.body.event)).toEqual(ROUTE);
    expect(hits.map((h) => h.headers['x-svc-secuencia'])).toEqual(['1', '2', '3', '4', '5']);
    for (const h of hits) {
      expect(verify(h.rawBody, h.headers['x-svc-signature'], cli.secret)).toBe(true);
      expect(() => verifyStandard(h, cli.secret)).not.toThrow();
      expect(h.headers['x-svc-modo']).toBe('test');
      expect(h.headers['user-agent']).toBe('SVC-Webhooks/1.0');
    }
    // Within seconds of the trigger.
    expect(hits[hits.length - 1]!.at - started).toBeLessThan(10_000);
    // One line per delivery: time, event, numeroGuia, the local status, the duration.
    await eventually(async () => ROUTE.every((e) => cli.lines.some((l) => l.includes(e) && l.includes(numeroGuia) && / 200 +\d+ ms/.test(l))), 5000, 'a line per delivery');

    // Recorded like any other delivery: five successes of the session, one attempt each.
    await eventually(
      async () => (await count(fx.pool, `select count(*) as n from entregas where webhook_id = $1 and numero_guia = $2 and estado = 'exitosa' and intentos = 1`, [cli.sessionId, numeroGuia])) === 5,
      5000,
      'five recorded successes',
    );
    // The session is no webhook: the list does not show it.
    const list = await fetch(`${api(fx.gw)}/api/v1/webhooks`, { headers: { authorization: `Bearer ${c.test}` } });
    expect(((await list.json()) as { data: Array<{ id: string }> }).data.map((w) => w.id)).not.toContain(cli.sessionId);
    // Its secret is stored sealed, never in the clear.
    expect(await count(fx.pool, `select count(*) as n from webhooks where secret like '%' || $1 || '%'`, [cli.secret.slice(6)])).toBe(0);
  }, 60_000);

  it('a local receiver answering 500 gets the three attempts, 1 s and 2 s apart', async () => {
    const cli = await listenOn(fx.gw, c.test, local.url('/fail'), ['--events', 'GUIA_CREADA']);
    clis.push(cli);
    const numeroGuia = await triggerVia(gw2, c.test, 'GUIA_CREADA');
    const ofGuia = (): Hit[] => local.hits.filter((h) => h.path === '/fail' && h.body.data.numeroGuia === numeroGuia);
    await eventually(async () => ofGuia().length >= 3, 15_000, 'three attempts at the failing receiver');
    await sleep(3500);
    const hits = ofGuia();
    expect(hits).toHaveLength(3);
    expect(new Set(hits.map((h) => h.headers['webhook-id'])).size).toBe(1);
    const gaps = [hits[1]!.at - hits[0]!.at, hits[2]!.at - hits[1]!.at];
    expect(gaps[0]).toBeGreaterThanOrEqual(900);
    expect(gaps[0]).toBeLessThan(2000);
    expect(gaps[1]).toBeGreaterThanOrEqual(1900);
    expect(gaps[1]).toBeLessThan(3000);
    await eventually(
      async () => (await count(fx.pool, `select count(*) as n from entregas where webhook_id = $1 and estado = 'fallida' and intentos = 3 and status_code = 500`, [cli.sessionId])) === 1,
      5000,
      'a failed delivery of three attempts',
    );
    expect(cli.lines.filter((l) => / 500 +\d+ ms/.test(l))).toHaveLength(3);
    cli.child.kill('SIGINT');
    expect(await cli.exited).toBe(0);
  }, 60_000);

  it("with the token's rate limit used up, the answers to the platform's attempts still decide them: one attempt each, no 429", async () => {
    // A company of its own, whose test token's window is filled here, through a gateway at a limit of
    // 30 a minute (the fixture's others allow 100,000, so that the other tests never meet it).
    const strict = await fx.addGateway({ env: { RATE_LIMIT_PER_MINUTE: '30' } });
    const full = await createCompany(fx.gw, { planActivo: true, creditos: 100 });
    const cli = await listenOn(strict, full.test, local.url('/full'), ['--events', 'GUIA_CREADA']);
    clis.push(cli);
    const get = () => strict.http.get('/api/v1/webhooks').set('Authorization', `Bearer ${full.test}`);
    // Every request but one of the window; the last one creates the shipment.
    for (let remaining = Number((await get()).headers['x-ratelimit-remaining']); remaining > 1; ) {
      remaining = Number((await get()).headers['x-ratelimit-remaining']);
    }
    const created = await createOne(strict, full.test);
    expect(created.status).toBe(201);
    const numeroGuia = created.body.data.numeroGuia as string;
    expect((await get()).status).toBe(429);

    const ofGuia = (): Hit[] => local.hits.filter((h) => h.path === '/full' && h.body.data.numeroGuia === numeroGuia);
    await eventually(
      async () => (await count(fx.pool, `select count(*) as n from entregas where webhook_id = $1 and numero_guia = $2 and estado = 'exitosa' and intentos = 1`, [cli.sessionId, numeroGuia])) === 1,
      10_000,
      "the delivery recorded a success at its first attempt (the answer was taken with the window full)",
    );
    // No retry follows (it would come 1 s later), and the tool reported its answer.
    await sleep(1500);
    expect(ofGuia()).toHaveLength(1);
    expect(cli.lines.some((l) => l.includes('answer not reported'))).toBe(false);
    // The answer took no place in the window: it is still full.
    expect((await get()).status).toBe(429);
  }, 60_000);

  it('live events never reach a session', async () => {
    const cli = await listenOn(fx.gw, c.test, local.url('/hook'));
    clis.push(cli);
    const before = local.hits.length;
    const live = (await createOne(fx.gw, c.live).expect(201)).body.data.numeroGuia as string;
    for (const evento of ['GUIA_RECOLECTADA', 'GUIA_EN_BODEGA']) expect((await moveOn(fx.gw, live, { evento })).status).toBe(200);
    // A sandbox event after them arrives, so the live ones had their chance to be routed first.
    const sandbox = await triggerVia(gw2, c.test, 'GUIA_CREADA');
    await eventually(async () => local.hits.some((h) => h.body.data.numeroGuia === sandbox), 10_000, 'the sandbox event');
    await sleep(500);
    expect(local.hits.slice(before).filter((h) => h.body.data.numeroGuia === live)).toHaveLength(0);
    expect(await count(fx.pool, `select count(*) as n from entregas e join webhooks w on w.id = e.webhook_id where w.tipo = 'escucha' and e.numero_guia = $1`, [live])).toBe(0);
    cli.child.kill('SIGINT');
    await cli.exited;
  }, 60_000);

  it('killing the CLI ends the session, and nothing goes to it afterwards', async () => {
    const cli = await listenOn(fx.gw, c.test, local.url('/killed'));
    await sleep(300);
    cli.child.kill('SIGKILL');
    await cli.exited;
    await eventually(async () => (await count(fx.pool, `select count(*) as n from webhooks where id = $1 and activo`, [cli.sessionId])) === 0, 5000, 'the session closed');
    const numeroGuia = await triggerVia(gw2, c.test, 'GUIA_EN_RUTA');
    await sleep(2000);
    expect(local.hits.filter((h) => h.path === '/killed')).toHaveLength(0);
    expect(await count(fx.pool, `select count(*) as n from entregas where webhook_id = $1`, [cli.sessionId])).toBe(0);
    expect(numeroGuia).toMatch(/^SVC/);
  }, 60_000);

  it('a live token is refused with a non-zero exit and the API\'s reason', async () => {
    const cli = svc(['listen', '--forward-to', local.url('/hook'), '--token', c.live, '--api', api(fx.gw)]);
    expect(await cli.exited).toBe(1);
    expect(cli.lines.join('\n')).toMatch(/403 FORBIDDEN.*test token/);
  }, 30_000);

  it('a wrong token, a wrong --api and a refused local URL each get a one-line reason', async () => {
    const wrongToken = svc(['listen', '--forward-to', local.url('/hook'), '--token', 'svc_test_nope', '--api', api(fx.gw)]);
    expect(await wrongToken.exited).toBe(1);
    expect(wrongToken.lines.join('\n')).toMatch(/401.*--token or SVC_TOKEN/);

    const closed = await freePort();
    const wrongApi = svc(['trigger', 'GUIA_CREADA', '--token', c.test, '--api', `http://127.0.0.1:${closed}`]);
    expect(await wrongApi.exited).toBe(1);
    expect(wrongApi.lines.join('\n')).toContain(`cannot reach the API at http://127.0.0.1:${closed} (ECONNREFUSED)`);

    const refusing = await listenOn(fx.gw, c.test, `http://127.0.0.1:${closed}/hook`, ['--events', 'GUIA_CREADA']);
    clis.push(refusing);
    await triggerVia(gw2, c.test, 'GUIA_CREADA');
    await eventually(async () => refusing.lines.some((l) => /CONNECTION.*refused or dropped the connection \(ECONNREFUSED\)/.test(l)), 10_000, 'the refused line');
    refusing.child.kill('SIGINT');
    await refusing.exited;
  }, 60_000);

  it('svc eventos prints the real catalog of GET /api/v1/eventos: a line per event, or all of it with --json', async () => {
    const res = await fetch(`${api(gw2)}/api/v1/eventos`, { headers: { authorization: `Bearer ${c.test}` } });
    expect(res.status).toBe(200);
    const catalog = ((await res.json()) as { data: Array<{ evento: string; descripcion: string; schema: unknown; ejemplo: unknown }> }).data;
    expect(catalog.map((e) => e.evento)).toEqual(expect.arrayContaining([...ROUTE, 'WEBHOOK_FALLANDO', 'WEBHOOK_DESACTIVADO', 'PING']));

    const lines = svc(['eventos', '--token', c.test, '--api', api(gw2)]);
    expect(await lines.exited).toBe(0);
    expect(lines.lines).toHaveLength(catalog.length);
    catalog.forEach((e, i) => expect(lines.lines[i]).toMatch(new RegExp(`^${e.evento} +${e.descripcion.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`)));

    const json = svc(['eventos', '--json', '--token', c.test, '--api', api(gw2)]);
    expect(await json.exited).toBe(0);
    expect(JSON.parse(json.lines.join('\n'))).toEqual(catalog);
  }, 30_000);

  it('at most 5 open sessions per company: the sixth is 429 LISTEN_LIMIT_EXCEEDED', async () => {
    const other = await createCompany(fx.gw, { planActivo: true, creditos: 10 });
    const open = () => fetch(`${api(gw2)}/api/v1/escuchas`, { method: 'POST', headers: { authorization: `Bearer ${other.test}`, 'content-type': 'application/json' }, body: '{}' });
    for (let i = 0; i < 5; i++) expect((await open()).status).toBe(201);
    const sixth = await open();
    expect(sixth.status).toBe(429);
    const body = (await sixth.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('LISTEN_LIMIT_EXCEEDED');
    expect(body.error.message).toMatch(/5 open listening sessions/);
  }, 30_000);
});
