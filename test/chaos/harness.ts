import { appendFileSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseEnv } from 'node:util';
import { Redis } from 'ioredis';
import { TEST_DATABASE_BASE, TEST_QUEUE_SHARDS, TEST_REDIS_CLUSTER_NODES } from '../support/env';
import { sleep } from '../support/eventually';
import { freePort } from '../support/free-port';
import { startReceiver, TEST_CERT_DIR, type ReceivedRequest, type ResponsePlan } from '../support/https-receiver';
import { dropPrefix, uniquePrefix } from '../support/redis-prefix';
import { serviceProcess, type ServiceProcess } from '../support/service-process';
import { startSideRedis, type SideRedis } from '../support/side-redis';
import { startRedisCluster, type RedisCluster, type RedisClusterOptions } from '../support/redis-cluster';
import { tcpPortsOf } from '../support/process-sockets';
import { hostPort, startTcpProxy, throughProxy, type TcpProxy } from '../support/tcp-proxy';
import { createTeardown, type Teardown } from '../support/teardown';
import { createTestDatabase, testPool, type TestDatabase } from '../support/test-database';
import { owedDeliveries, stuckWork, type OwedDelivery, type StuckWork } from './committed-work';

/**
 * The chaos suite's harness (issue 10). Each scenario gets a stack of its own: a cloned database, a
 * private `redis-server` on a side port (or, with `redisCluster`, a Redis Cluster of its own whose
 * nodes the scenario can kill: issue 38), optionally TCP proxies it can cut in front of Postgres or
 * Redis, one gateway and two dispatchers as real child processes (restartable), and an HTTPS
 * receiver behind two webhooks of one company subscribed to every event.
 *
 * A steady stream (a batch of 5 shipments through the public API every 100 ms, and every other
 * batch's first shipment moved on by the internal route: ~55 events/s) runs while the scenario's
 * fault happens, and goes on until at least `minEvents` were accepted and `tailMs` after the fault.
 * Then the harness waits (the settle) until every delivery the record owes has arrived and nothing
 * is left owed, prints one line (owed, delivered, lost, duplicates, 5xx answers, time to settle,
 * the fault's effects) and checks:
 *   - nothing lost: every (event, webhook) pair owed by an event committed to `outbox` (whether or
 *     not its request was answered: a fault can lose the answer after the commit) was accepted by
 *     the receiver, and `entregas` records its delivery (committed-work.ts);
 *   - nothing stuck: no event left without its fan-out, no delivery left `pendiente`;
 *   - what the API promised is committed: every shipment answered 201 is in `guias`, and its
 *     creation (and its transition answered 200) among the committed events;
 *   - nothing received that no committed event owes, and every delivery recorded `exitosa` received;
 *   - every request for one (event, webhook) carries the same `webhookId`;
 *   - the fault took effect: each `h.effect(...)` the scenario declared measured above zero (the
 *     killed process had work in flight, the proxy carried and lost connections, answers were lost
 *     to it), so that a fault that did nothing cannot pass;
 *   - the services used the stack's own Redis and, where a proxy stands in front of Postgres or
 *     Redis, reached it only through the proxy (children get neither an inherited
 *     REDIS_CLUSTER_NODES nor a `.env`'s settings).
 *
 * CHAOS_REPORT=<file> also appends each report line there; CHAOS_LOG_DIR=<dir> keeps every
 * process's output in <dir>/<scenario>-<process>.log.
 */

const ADMIN_TOKEN = 'chaos-admin-token-0123456789abcdef';
const WEBHOOK_PATHS = ['/w1', '/w2'] as const;
const ROOT = join(__dirname, '../..');
/** The stream has this many events accepted before the proxy check (and before any scenario's fault). */
const EVENTS_BEFORE_CONNECTION_CHECK = 100;

export interface ChaosOptions {
  /** The side Redis keeps an append-only file (fsync everysec), so a restart replays it. Default false. */
  redisAppendonly?: boolean;
  /** Whose DATABASE_URL goes through a proxy the scenario can cut (`h.postgresProxy`). */
  postgresProxyFor?: 'dispatchers' | 'gateway';
  /** Every service reaches Redis through a proxy the scenario can cut (`h.redisProxy`). Default false. */
  redisProxy?: boolean;
  /** The stream goes on until this many events were accepted (and the fault is over). Default 1000. */
  minEvents?: number;
  /** How long after the fault ends the stream keeps going at least. Default 3000 ms. */
  tailMs?: number;
  /** Give up waiting for the owed deliveries after this long. Default 120000 ms. */
  settleTimeoutMs?: number;
  /** ...or once nothing at all has arrived for this long. Default 30000 ms. */
  quietMs?: number;
  /**
   * The stack runs on a Redis Cluster of its own (`h.cluster`) with these masters and options,
   * instead of a side Redis (or the cluster suite's cluster), so the scenario can break one node.
   */
  redisCluster?: RedisClusterOptions & { masters: number };
  /** QUEUE_SHARDS for every process of the stack. Unset: the services' default. */
  queueShards?: number;
}

/** What a scenario's fault function gets. */
export interface Chaos {
  /** Throws on a cluster run (`pnpm test:cluster`), which has no side Redis. */
  readonly redis: SideRedis;
  /** Throws unless `postgresProxyFor` was set. */
  readonly postgresProxy: TcpProxy;
  /** Throws unless `redisProxy` was set. */
  readonly redisProxy: TcpProxy;
  /** Throws unless `redisCluster` was set. */
  readonly cluster: RedisCluster;
  gateway: ServiceProcess;
  dispatchers: ServiceProcess[];
  /** Resolves once the stream has had this many events accepted (shipments 201 + transitions 200). */
  untilEvents(n: number): Promise<void>;
  /** Resolves once the receiver has had this many requests. */
  untilReceived(n: number): Promise<void>;
  /** Resolves once `done()` holds; throws naming `what` after `timeoutMs` (default 10000). */
  until(what: string, done: () => boolean, timeoutMs?: number): Promise<void>;
  sleep(ms: number): Promise<void>;
  /**
   * Declares an effect the fault must have had: `measure()`, called at the end (after the settle),
   * must be above zero. Its value is in the report line; at zero or below the scenario fails.
   */
  effect(what: string, measure: () => number | Promise<number>): void;
  /** The stream's requests answered 5xx and never answered so far (each booked once it ended). */
  answers(): { status5xx: number; unanswered: number };
  /**
   * Requests the receiver holds now that came from `p`'s connections, that it will accept (not one
   * of its 503s, which are sent again whatever happens) and that arrived too recently to have been
   * answered yet (this process's event loop may hear of an answer a little late).
   */
  inHandFrom(p: ServiceProcess): ReceivedRequest[];
  /**
   * How many of `requests` that the receiver was accepting (not one of its 503s) had their delivery
   * sent again afterwards (a later request with the same webhookId): the sender never had the answer.
   */
  sentAgain(requests: readonly ReceivedRequest[]): number;
  /** The stream's requests sent and not yet answered (nor failed). */
  requestsInFlight(): number;
  /** A query on the stack's database, e.g. what became of the events committed during a cut. */
  count(text: string, params?: unknown[]): Promise<number>;
  /** Runs `fn` on a connection of its own to the side Redis (not through any proxy), with the services' key prefix. */
  withRedis<T>(fn: (redis: Redis, keyPrefix: string) => Promise<T>): Promise<T>;
  /** Counts from now on the dispatchers' output lines (every run of each) that contain `text`; returns the count so far. */
  countDispatcherLines(text: string): () => number;
  /** Every request the receiver has had so far, in order of arrival (refused ones included). */
  received(): readonly ReceivedRequest[];
  /** Whether the receiver answered this request 503 (the first attempt of one delivery in ten). */
  wasRefused(request: ReceivedRequest): boolean;
  /**
   * A check of the scenario's own, run at the end (after the settle): each problem it returns
   * fails the scenario with the harness's own.
   */
  check(what: string, problems: () => string[] | Promise<string[]>): void;
}

export interface ChaosReport {
  scenario: string;
  /** (event, webhook) pairs owed by the events committed to `outbox`. */
  expected: number;
  delivered: number;
  lost: number;
  duplicates: number;
  status5xx: number;
  /** ms from the end of the fault and stream until every owed delivery had arrived and nothing was owed; undefined: never. */
  settleMs: number | undefined;
  /** Events committed to `outbox`. */
  committed: number;
  /** Of those, events whose request got no success answer (lost to the fault after the commit), by event. */
  committedUnanswered: Record<string, number>;
  events: number;
  created: number;
  transitions: number;
  unanswered: number;
  /** Pairs received that no committed event owes. */
  extra: number;
  /** Requests the receiver refused (503: the first attempt of one delivery in ten). */
  refused: number;
  stuck: StuckWork;
  streamMs: number;
  effects: Array<{ what: string; value: number }>;
}

// ---------------------------------------------------------------------------------------------
// The stream: a steady pace of batch creations, each answered batch's first shipment moved on
// every other time, open loop (a slow answer does not slow the pace) up to a cap in flight.

interface StreamSettings {
  baseUrl: () => string;
  liveToken: string;
  intervalMs: number;
  batchSize: number;
  maxInFlight: number;
  timeoutMs: number;
}

class Stream {
  readonly created = new Set<string>();
  readonly transitioned = new Set<string>();
  status5xx = 0;
  unanswered = 0;
  skipped = 0;
  /** Requests sent and not yet answered (nor failed). */
  openCalls = 0;
  readonly otherStatuses = new Map<number, number>();
  private inFlight = 0;
  private timer: NodeJS.Timeout | undefined;
  private batches = 0;
  private idle: Array<() => void> = [];
  startedAt = 0;
  stoppedAt = 0;

  constructor(private readonly s: StreamSettings) {}

  get events(): number {
    return this.created.size + this.transitioned.size;
  }

  start(): void {
    this.startedAt = Date.now();
    let next = Date.now();
    const tick = (): void => {
      if (this.inFlight < this.s.maxInFlight) this.batch(this.batches++);
      else this.skipped += 1;
      next += this.s.intervalMs;
      this.timer = setTimeout(tick, Math.max(0, next - Date.now()));
    };
    tick();
  }

  /** Stops sending and waits for every request in flight to end (answered or timed out). */
  async stop(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.inFlight > 0) await new Promise<void>((resolve) => this.idle.push(resolve));
    this.stoppedAt ||= Date.now();
  }

  private async call(path: string, token: string, body: unknown): Promise<{ status: number; body: unknown } | undefined> {
    this.openCalls += 1;
    try {
      const res = await fetch(`${this.s.baseUrl()}${path}`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(this.s.timeoutMs),
      });
      const text = await res.text();
      if (res.status >= 500) this.status5xx += 1;
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = undefined;
      }
      return { status: res.status, body: parsed };
    } catch {
      this.unanswered += 1; // refused, reset, timed out: the outcome is unknown
      return undefined;
    } finally {
      this.openCalls -= 1;
    }
  }

  private other(status: number): void {
    if (status < 500) this.otherStatuses.set(status, (this.otherStatuses.get(status) ?? 0) + 1);
  }

  private batch(n: number): void {
    const guias = Array.from({ length: this.s.batchSize }, (_, i) => ({
      destinatario: { nombre: `Cliente ${n}-${i}`, telefono: '+502 5555 0000', direccion: `${i} Avenida ${n}, Zona 1` },
      paquete: { peso: 1.5 },
      referencia: `chaos-${n}-${i}`,
    }));
    // In flight until its answer (and its transition's) is booked, so stop() sees every outcome.
    this.inFlight += 1;
    void (async () => {
      const answer = await this.call('/api/v1/guias/batch', this.s.liveToken, { guias });
      if (!answer) return;
      if (answer.status !== 201) return this.other(answer.status);
      const numeros = ((answer.body as { data?: { guias?: Array<{ numeroGuia: string }> } } | undefined)?.data?.guias ?? []).map((g) => g.numeroGuia);
      for (const numero of numeros) this.created.add(numero);
      if (n % 2 === 0 && numeros[0] !== undefined && this.timer !== undefined) {
        const numero = numeros[0];
        const moved = await this.call(`/internal/v1/guias/${encodeURIComponent(numero)}/eventos`, ADMIN_TOKEN, { evento: 'GUIA_RECOLECTADA' });
        if (moved?.status === 200) this.transitioned.add(numero);
        else if (moved) this.other(moved.status);
      }
    })()
      .catch(() => undefined)
      .finally(() => {
        this.inFlight -= 1;
        if (this.inFlight === 0) for (const wake of this.idle.splice(0)) wake();
      });
  }
}

// ---------------------------------------------------------------------------------------------
// The receiver's side: it answers every request after RECEIVER_DELAY_MS (so a fault finds
// deliveries in flight), and refuses the first attempt of one delivery in ten with a 503 (receivers
// do fail), so that retries are waiting in Redis whenever a fault strikes. Only what it accepted
// (2xx) counts as delivered; every request, refused or not, counts for the webhookId check.

const RECEIVER_DELAY_MS = 100;
const refusesFirstAttempt = (webhookId: string): boolean => parseInt(webhookId.slice(-2), 16) % 10 === 0;

interface Receipt {
  key: string;
  webhookId: string;
}

class Receipts {
  /** (path, event, numeroGuia) → the webhookIds of every request for it, refused ones included. */
  readonly byKey = new Map<string, Set<string>>();
  /** The (path, event, numeroGuia) keys accepted (answered 2xx) at least once. */
  readonly accepted = new Set<string>();
  /** The webhookIds (delivery ids) accepted at least once. */
  readonly acceptedIds = new Set<string>();
  acceptedTotal = 0;
  refusedTotal = 0;
  unreadable = 0;
  private seen = 0;
  private readonly refusedOnce = new Set<string>();
  private readonly refused = new WeakSet<ReceivedRequest>();

  /** Whether the responder answered this request 503. */
  wasRefused(request: ReceivedRequest): boolean {
    return this.refused.has(request);
  }

  /** The receiver's responder. It runs as each request arrives, before `update()` can see it. */
  readonly respond = (request: ReceivedRequest): ResponsePlan => {
    const r = parse(request);
    if (r && refusesFirstAttempt(r.webhookId) && !this.refusedOnce.has(r.webhookId)) {
      this.refusedOnce.add(r.webhookId);
      this.refused.add(request);
      return { status: 503, delayMs: RECEIVER_DELAY_MS };
    }
    return { status: 200, delayMs: RECEIVER_DELAY_MS };
  };

  /** Reads what arrived since the last call (the receiver's log only grows); returns how many requests that was. */
  update(requests: readonly ReceivedRequest[]): number {
    const fresh = requests.length - this.seen;
    for (; this.seen < requests.length; this.seen++) {
      const request = requests[this.seen]!;
      const r = parse(request);
      if (!r) {
        this.unreadable += 1;
        continue;
      }
      this.byKey.set(r.key, (this.byKey.get(r.key) ?? new Set()).add(r.webhookId));
      if (this.refused.has(request)) {
        this.refusedTotal += 1;
        continue;
      }
      this.acceptedTotal += 1;
      this.accepted.add(r.key);
      this.acceptedIds.add(r.webhookId);
    }
    return fresh;
  }
}

const key = (path: string, event: string, numeroGuia: string): string => `${path} ${event} ${numeroGuia}`;

function parse(req: ReceivedRequest): Receipt | undefined {
  try {
    const body = JSON.parse(req.rawBody.toString('utf8')) as { event: string; webhookId: string; data: { numeroGuia: string } };
    return { key: key(req.path, body.event, body.data.numeroGuia), webhookId: body.webhookId };
  } catch {
    return undefined;
  }
}

// ---------------------------------------------------------------------------------------------
// Where the children's connections go.

/**
 * The children's settings, shielded from what would send them elsewhere than this stack: a
 * REDIS_CLUSTER_NODES inherited from the shell that runs jest (it would win over REDIS_URL), and
 * every setting of a `.env` at the workspace root, which each service reads at start without
 * overriding its environment: each is set here, empty where the harness gives no value (the
 * services read empty as unset).
 */
function shieldedEnv(given: Record<string, string>): Record<string, string> {
  const dotEnv = join(ROOT, '.env');
  const fromDotEnv = existsSync(dotEnv) ? Object.keys(parseEnv(readFileSync(dotEnv, 'utf8'))) : [];
  const blank = Object.fromEntries([...fromDotEnv, 'REDIS_CLUSTER_NODES'].map((name) => [name, '']));
  return { ...blank, ...given };
}

/** The client ports of the side Redis's connections, but for the one asking. */
async function redisClientPorts(redis: Redis): Promise<number[]> {
  const me = String(await redis.client('ID'));
  const list = String(await redis.client('LIST'));
  return list
    .split('\n')
    .filter((line) => line.trim() && !new RegExp(`(^| )id=${me}( |$)`).test(line))
    .map((line) => Number(/(?:^| )addr=[^ ]*:(\d+)(?: |$)/.exec(line)?.[1] ?? NaN));
}

// ---------------------------------------------------------------------------------------------

function formatReport(r: ChaosReport): string {
  const settle = r.settleMs === undefined ? 'never' : `${(r.settleMs / 1000).toFixed(1)} s`;
  const effects = r.effects.map((e) => `${e.what}: ${e.value}`).join('; ');
  const unansweredBy = Object.entries(r.committedUnanswered).map(([evento, n]) => `${evento} ${n}`).join(', ');
  return (
    `[chaos] ${r.scenario}: expected ${r.expected}, delivered ${r.delivered}, lost ${r.lost}, ` +
    `duplicates ${r.duplicates}, 5xx ${r.status5xx}, settle ${settle} ` +
    `(events ${r.events}: ${r.created} created + ${r.transitions} moved on in ${(r.streamMs / 1000).toFixed(1)} s; ` +
    `committed ${r.committed}, of which unanswered ${Object.values(r.committedUnanswered).reduce((a, b) => a + b, 0)}${unansweredBy ? ` (${unansweredBy})` : ''}; ` +
    `unanswered ${r.unanswered}, extra ${r.extra}, refused by the receiver ${r.refused}; ` +
    `left unfanned ${r.stuck.unfanned}, left pendiente ${r.stuck.pending})` +
    (effects ? ` effects: ${effects}` : '')
  );
}

function countBy<T>(items: readonly T[], keyOf: (item: T) => string): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const item of items) counts[keyOf(item)] = (counts[keyOf(item)] ?? 0) + 1;
  return counts;
}

function printReport(line: string): void {
  process.stdout.write(`${line}\n`);
  const file = process.env.CHAOS_REPORT;
  if (file) appendFileSync(file, `${line}\n`);
}

async function json(url: string, init: RequestInit): Promise<{ status: number; body: { data?: Record<string, unknown> } }> {
  const res = await fetch(url, { ...init, headers: { 'Content-Type': 'application/json', ...init.headers }, signal: AbortSignal.timeout(10_000) });
  return { status: res.status, body: (await res.json()) as { data?: Record<string, unknown> } };
}

/** Builds the stack, runs the stream under `fault`, settles, reports and checks; undone by `teardown`. */
async function runChaos(scenario: string, options: ChaosOptions, fault: (h: Chaos) => Promise<void>, teardown: Teardown): Promise<void> {
  const slug = scenario.replace(/[^a-z0-9]+/gi, '-').toLowerCase();
  const logDir = process.env.CHAOS_LOG_DIR;
  if (logDir) mkdirSync(logDir, { recursive: true });

  // Postgres: a database of its own, a pool for the checks, and a proxy when the scenario cuts it.
  const database: TestDatabase = await createTestDatabase();
  teardown.push(() => database.drop());
  const pool = testPool(database.url);
  teardown.push(() => pool.end());
  let postgresProxy: TcpProxy | undefined;
  if (options.postgresProxyFor) {
    const proxy = await startTcpProxy(hostPort(TEST_DATABASE_BASE));
    teardown.push(() => proxy.close());
    postgresProxy = proxy;
  }

  // Redis: a private server (the shared one is never broken), behind a proxy when the scenario cuts
  // it; or, under the cluster suite (TEST_REDIS_CLUSTER_NODES), that suite's private cluster, whose
  // nodes the clients find by themselves, so it has neither a proxy nor one server to break.
  const prefix = uniquePrefix('chaos');
  let sideRedis: SideRedis | undefined;
  let redisProxy: TcpProxy | undefined;
  let redisCluster: RedisCluster | undefined;
  let redisEnv: Record<string, string>;
  if (options.redisCluster) {
    if (options.redisProxy || options.redisAppendonly) throw new Error(`${scenario}: a proxy or an append-only file is for a side Redis, not a cluster of its own`);
    const { masters, ...clusterOptions } = options.redisCluster;
    const started = await startRedisCluster(masters, 30_000, clusterOptions);
    teardown.push(() => started.stop());
    redisCluster = started;
    redisEnv = { REDIS_CLUSTER_NODES: started.nodes };
  } else if (TEST_REDIS_CLUSTER_NODES) {
    if (options.redisProxy || options.redisAppendonly) throw new Error(`${scenario}: breaks a side Redis, which a cluster run does not have`);
    teardown.push(() => dropPrefix(prefix));
    redisEnv = { REDIS_CLUSTER_NODES: TEST_REDIS_CLUSTER_NODES, ...(TEST_QUEUE_SHARDS ? { QUEUE_SHARDS: TEST_QUEUE_SHARDS } : {}) };
  } else {
    const started = await startSideRedis({ appendonly: options.redisAppendonly ?? false });
    teardown.push(() => started.stop());
    sideRedis = started;
    if (options.redisProxy) {
      const proxy = await startTcpProxy(hostPort(started.url));
      teardown.push(() => proxy.close());
      redisProxy = proxy;
    }
    redisEnv = { REDIS_URL: redisProxy ? throughProxy(started.url, redisProxy) : started.url };
  }

  const receipts = new Receipts();
  const receiver = await startReceiver({ defaultResponse: receipts.respond });
  teardown.push(() => receiver.close());

  const common: Record<string, string> = {
    ...redisEnv,
    ...(options.queueShards === undefined ? {} : { QUEUE_SHARDS: String(options.queueShards) }),
    REDIS_PREFIX: prefix,
    LOG_LEVEL: 'info',
    DISPATCH_HOST_MAP: 'receiver.test=127.0.0.1',
    DISPATCH_ALLOW_CIDRS: '127.0.0.0/8',
    NODE_EXTRA_CA_CERTS: join(TEST_CERT_DIR, 'ca.pem'),
    SHUTDOWN_TIMEOUT_MS: '5000',
  };
  const viaProxy = (who: 'dispatchers' | 'gateway'): string =>
    options.postgresProxyFor === who && postgresProxy ? throughProxy(database.url, postgresProxy) : database.url;

  const watchedLines = new Map<string, number>();
  const port = await freePort();
  const gateway = serviceProcess({
    name: 'gateway',
    entry: 'services/gateway/src/main.ts',
    readyLine: '"gateway listening"',
    logFile: logDir ? join(logDir, `${slug}-gateway.log`) : undefined,
    env: shieldedEnv({
      ...common,
      DATABASE_URL: viaProxy('gateway'),
      PORT: String(port),
      GATEWAY_METRICS_PORT: '0',
      ADMIN_TOKEN,
      RATE_LIMIT_PER_MINUTE: '10000000',
      DB_POOL_SIZE: '8',
    }),
  });
  const dispatchers = [1, 2].map((i) =>
    serviceProcess({
      name: `dispatcher-${i}`,
      entry: 'services/dispatcher/src/main.ts',
      readyLine: '"dispatcher started"',
      logFile: logDir ? join(logDir, `${slug}-dispatcher-${i}.log`) : undefined,
      onLine: (line) => {
        for (const text of watchedLines.keys()) if (line.includes(text)) watchedLines.set(text, watchedLines.get(text)! + 1);
      },
      env: shieldedEnv({
        ...common,
        DATABASE_URL: viaProxy('dispatchers'),
        DISPATCHER_METRICS_PORT: '0',
        DB_POOL_SIZE: '6',
        // A dead process's jobs move on after this (production: 30 s), so a run fits in minutes.
        DISPATCHER_LOCK_DURATION_MS: '5000',
        // The reconciler's (ignored by a dispatcher without one).
        RECONCILE_INTERVAL_MS: '1000',
        RECONCILE_GRACE_MS: '3000',
      }),
    }),
  );
  // Stopped together (SIGTERM, SIGKILL after 15 s), before what they use goes away.
  teardown.push(() => Promise.all([gateway, ...dispatchers].map((p) => p.stop())));
  await Promise.all([gateway.start(), ...dispatchers.map((d) => d.start())]);
  const baseUrl = `http://127.0.0.1:${port}`;

  // One company, two webhooks subscribed to every event.
  const admin = { Authorization: `Bearer ${ADMIN_TOKEN}` };
  const company = await json(`${baseUrl}/internal/v1/empresas`, {
    method: 'POST',
    headers: admin,
    body: JSON.stringify({ nombre: 'Chaos', verificada: true, planActivo: true, creditos: 1_000_000, limiteDiario: 1_000_000 }),
  });
  if (company.status !== 201) throw new Error(`company: ${company.status} ${JSON.stringify(company.body)}`);
  const tokens = await json(`${baseUrl}/internal/v1/empresas/${String(company.body.data!.id)}/tokens`, { method: 'POST', headers: admin });
  if (tokens.status !== 201) throw new Error(`tokens: ${tokens.status} ${JSON.stringify(tokens.body)}`);
  const live = String(tokens.body.data!.live);
  for (const path of WEBHOOK_PATHS) {
    const hook = await json(`${baseUrl}/api/v1/webhooks`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${live}` },
      body: JSON.stringify({ url: receiver.url(path), eventos: [] }),
    });
    if (hook.status !== 201) throw new Error(`webhook: ${hook.status} ${JSON.stringify(hook.body)}`);
  }

  const stream = new Stream({ baseUrl: () => baseUrl, liveToken: live, intervalMs: 100, batchSize: 5, maxInFlight: 64, timeoutMs: 15_000 });
  teardown.push(() => stream.stop());
  const waitFor = async (what: string, done: () => boolean, timeoutMs = 90_000): Promise<void> => {
    const end = Date.now() + timeoutMs;
    while (!done()) {
      if (Date.now() > end) throw new Error(`${scenario}: ${what} not within ${timeoutMs} ms`);
      await sleep(50);
    }
  };
  const withRedis = async <T>(fn: (redis: Redis, keyPrefix: string) => Promise<T>): Promise<T> => {
    if (!sideRedis) throw new Error('no side Redis: this run is on a Redis Cluster');
    const redis = new Redis(sideRedis.url, { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null });
    redis.on('error', () => undefined);
    try {
      await redis.connect();
      return await fn(redis, prefix);
    } finally {
      redis.disconnect();
    }
  };
  const effects: Array<{ what: string; measure: () => number | Promise<number> }> = [];
  const checks: Array<{ what: string; problems: () => string[] | Promise<string[]> }> = [];
  const h: Chaos = {
    get redis() {
      if (!sideRedis) throw new Error('no side Redis: this run is on a Redis Cluster');
      return sideRedis;
    },
    get postgresProxy() {
      if (!postgresProxy) throw new Error('no Postgres proxy: set postgresProxyFor');
      return postgresProxy;
    },
    get redisProxy() {
      if (!redisProxy) throw new Error('no Redis proxy: set redisProxy');
      return redisProxy;
    },
    get cluster() {
      if (!redisCluster) throw new Error('no Redis Cluster of its own: set redisCluster');
      return redisCluster;
    },
    gateway,
    dispatchers,
    untilEvents: (n) => waitFor(`${n} events accepted`, () => stream.events >= n),
    untilReceived: (n) => waitFor(`${n} requests received`, () => receiver.requests.length >= n),
    until: (what, done, timeoutMs = 10_000) => waitFor(what, done, timeoutMs),
    sleep,
    effect: (what, measure) => void effects.push({ what, measure }),
    answers: () => ({ status5xx: stream.status5xx, unanswered: stream.unanswered }),
    inHandFrom(p) {
      const recent = Date.now() - RECEIVER_DELAY_MS / 2;
      const ports = p.running && p.pid !== undefined ? tcpPortsOf(p.pid, receiver.port) : new Set<number>();
      return receiver.inHand().filter((r) => ports.has(r.remotePort) && !receipts.wasRefused(r) && r.receivedAt > recent);
    },
    sentAgain(requests) {
      const all = receiver.requests;
      return requests.filter((r) => {
        if (receipts.wasRefused(r)) return false;
        const id = parse(r)?.webhookId;
        const at = all.indexOf(r);
        return id !== undefined && all.slice(at + 1).some((later) => parse(later)?.webhookId === id);
      }).length;
    },
    requestsInFlight: () => stream.openCalls,
    count: async (text, params = []) => Number((await pool.query<{ n: string }>(text, params)).rows[0]?.n ?? 0),
    withRedis,
    countDispatcherLines(text) {
      if (!watchedLines.has(text)) watchedLines.set(text, 0);
      return () => watchedLines.get(text)!;
    },
    received: () => receiver.requests,
    wasRefused: (request) => receipts.wasRefused(request),
    check: (what, problems) => void checks.push({ what, problems }),
  };

  /**
   * Where the services' connections went, while they are all in use: to the stack's own Redis
   * (at least one connection per process), and where a proxy stands in front of Postgres or Redis,
   * only through it: every Postgres backend of the proxied service (its pool's application_name)
   * and every connection on the side Redis has a client port the proxy opened.
   */
  const connectionProblems = async (requireSome: boolean): Promise<string[]> => {
    const problems: string[] = [];
    if (postgresProxy && options.postgresProxyFor) {
      const who = options.postgresProxyFor === 'gateway' ? 'gateway' : 'dispatcher';
      const ports = (await pool.query<{ client_port: number }>(`select client_port from pg_stat_activity where datname = current_database() and application_name = $1`, [who])).rows.map((r) => r.client_port);
      const proxied = postgresProxy.upstreamPorts();
      const around = ports.filter((p) => !proxied.has(p));
      if (requireSome && ports.length === 0) problems.push(`the ${who} had no connection to the stack's database`);
      if (around.length) problems.push(`${around.length} of the ${who}'s ${ports.length} Postgres connections did not go through the proxy (client ports ${around.slice(0, 5).join(', ')})`);
    }
    if (sideRedis) {
      const ports = await withRedis((r) => redisClientPorts(r));
      if (requireSome && ports.length < 1 + dispatchers.length) problems.push(`the stack's Redis had ${ports.length} connections: the services are not all using it`);
      if (redisProxy) {
        const proxied = redisProxy.upstreamPorts();
        const around = ports.filter((p) => !proxied.has(p));
        if (around.length) problems.push(`${around.length} of ${ports.length} connections to the stack's Redis did not go through the proxy (client ports ${around.slice(0, 5).join(', ')})`);
      }
    }
    return problems;
  };

  // The stream, the fault under it, and the stream's tail once the fault is over.
  const minEvents = options.minEvents ?? 1000;
  stream.start();
  await h.untilEvents(EVENTS_BEFORE_CONNECTION_CHECK);
  const connectionsUnderLoad = await connectionProblems(true);
  await fault(h);
  const faultEnded = Date.now();
  await waitFor(`${minEvents} events accepted`, () => stream.events >= minEvents && Date.now() - faultEnded >= (options.tailMs ?? 3000), 120_000);
  await stream.stop();

  // Settle: until every owed pair arrived and nothing is owed, the deadline passed, or nothing
  // arrived for quietMs. The record is read again each round: a request the client gave up on may
  // still commit.
  let owed: OwedDelivery[] = [];
  let stuck: StuckWork = { unfanned: 0, pending: 0 };
  const missing = (): OwedDelivery[] => owed.filter((o) => !receipts.accepted.has(key(o.path, o.evento, o.numeroGuia)));
  const settleStart = Date.now();
  let lastArrival = settleStart;
  let settleMs: number | undefined;
  for (;;) {
    if (receipts.update(receiver.requests) > 0) lastArrival = Date.now();
    [owed, stuck] = await Promise.all([owedDeliveries(pool), stuckWork(pool)]);
    if (missing().length === 0 && stuck.unfanned === 0 && stuck.pending === 0) {
      settleMs = Date.now() - settleStart;
      break;
    }
    if (Date.now() - settleStart > (options.settleTimeoutMs ?? 120_000) || Date.now() - lastArrival > (options.quietMs ?? 30_000)) break;
    await sleep(250);
  }
  await sleep(2000); // late repeats, for the duplicates count
  receipts.update(receiver.requests);
  [owed, stuck] = await Promise.all([owedDeliveries(pool), stuckWork(pool)]);

  const lost = missing();
  const owedKeys = new Set(owed.map((o) => key(o.path, o.evento, o.numeroGuia)));
  const committedEvents = new Map(owed.map((o) => [o.eventId, o]));
  const answeredEvent = (o: OwedDelivery): boolean => (o.evento === 'GUIA_CREADA' ? stream.created : stream.transitioned).has(o.numeroGuia);
  const promised: string[] = [];
  for (const path of WEBHOOK_PATHS) {
    for (const n of stream.created) promised.push(key(path, 'GUIA_CREADA', n));
    for (const n of stream.transitioned) promised.push(key(path, 'GUIA_RECOLECTADA', n));
  }
  const measured = await Promise.all(effects.map(async (e) => ({ what: e.what, value: await e.measure() })));
  const report: ChaosReport = {
    scenario,
    expected: owed.length,
    delivered: receipts.accepted.size,
    lost: lost.length,
    duplicates: receipts.acceptedTotal - receipts.accepted.size,
    status5xx: stream.status5xx,
    settleMs,
    committed: committedEvents.size,
    committedUnanswered: countBy([...committedEvents.values()].filter((o) => !answeredEvent(o)), (o) => o.evento),
    events: stream.events,
    created: stream.created.size,
    transitions: stream.transitioned.size,
    unanswered: stream.unanswered,
    extra: [...receipts.accepted].filter((k) => !owedKeys.has(k)).length,
    refused: receipts.refusedTotal,
    stuck,
    streamMs: stream.stoppedAt - stream.startedAt,
    effects: measured,
  };
  printReport(formatReport(report));

  // The checks, all of them reported at once.
  const problems: string[] = [];
  if (stream.events < minEvents) problems.push(`the stream had ${stream.events} events accepted, fewer than ${minEvents}`);
  if (owed.length === 0) problems.push('no event was committed');
  if (lost.length) {
    const e = lost.slice(0, 5).map((o) => `${key(o.path, o.evento, o.numeroGuia)} (${answeredEvent(o) ? 'answered' : 'unanswered'}, delivery ${o.deliveryId ?? 'never recorded'}${o.estado ? ` ${o.estado}` : ''})`);
    problems.push(`${lost.length} of ${owed.length} deliveries owed by committed events never arrived, e.g. ${e.join('; ')}`);
  }
  const unrecorded = owed.filter((o) => o.deliveryId === null);
  if (unrecorded.length) problems.push(`${unrecorded.length} deliveries owed by committed events were never recorded in entregas, e.g. ${unrecorded.slice(0, 3).map((o) => key(o.path, o.evento, o.numeroGuia)).join('; ')}`);
  if (stuck.unfanned) problems.push(`${stuck.unfanned} committed events were never fanned out`);
  if (stuck.pending) problems.push(`${stuck.pending} deliveries were left pendiente`);
  const uncommitted = promised.filter((k) => !owedKeys.has(k));
  if (uncommitted.length) problems.push(`${uncommitted.length} events the API answered with success are not committed, e.g. ${uncommitted.slice(0, 3).join('; ')}`);
  if (report.extra) problems.push(`${report.extra} (event, webhook) pairs were received that no committed event owes`);
  const mixed = [...receipts.byKey].filter(([, ids]) => ids.size > 1);
  if (mixed.length) problems.push(`${mixed.length} (event, webhook) pairs arrived under more than one webhookId, e.g. ${mixed[0]![0]}: ${[...mixed[0]![1]].join(', ')}`);
  if (receipts.unreadable) problems.push(`${receipts.unreadable} requests had a body that is not a delivery`);
  const exitosas = (await pool.query<{ id: string }>(`select id from entregas where estado = 'exitosa'`)).rows.map((r) => r.id);
  const unseen = exitosas.filter((id) => !receipts.acceptedIds.has(id));
  if (unseen.length) problems.push(`${unseen.length} of ${exitosas.length} deliveries recorded exitosa were never received, e.g. ${unseen.slice(0, 3).join(', ')}`);
  const numeros = [...stream.created];
  const stored = Number((await pool.query<{ n: string }>('select count(*) n from guias where numero_guia = any($1::text[])', [numeros])).rows[0]!.n);
  if (stored !== numeros.length) problems.push(`${numeros.length - stored} of ${numeros.length} shipments answered 201 are not in guias`);
  for (const e of measured) if (!(e.value > 0)) problems.push(`the fault had no effect: ${e.what} = ${e.value}`);
  for (const c of checks) problems.push(...(await c.problems()).map((p) => `${c.what}: ${p}`));
  problems.push(...connectionsUnderLoad, ...(await connectionProblems(false)));
  if (problems.length) {
    const states = (await pool.query<{ estado: string; n: string }>('select estado, count(*) n from entregas group by estado order by 1')).rows;
    problems.push(`entregas by estado: ${states.map((s) => `${s.estado} ${s.n}`).join(', ') || 'none'}`);
    if (stream.otherStatuses.size) problems.push(`other answers: ${JSON.stringify(Object.fromEntries(stream.otherStatuses))}`);
  }
  expect(problems).toEqual([]);
}

/**
 * One chaos scenario as a jest test: `fault` runs while the stream does, breaks and mends what it
 * was given, and declares what the fault must have done (`h.effect`). Everything is undone after
 * it, even when it fails.
 */
export function chaosScenario(scenario: string, options: ChaosOptions, fault: (h: Chaos) => Promise<void>): void {
  describe(`chaos: ${scenario}`, () => {
    const teardown = createTeardown();
    afterAll(() => teardown.run(), 60_000);
    it('delivers every committed event, leaves nothing owed, repeats only under one webhookId, and its fault took effect', () => runChaos(scenario, options, fault, teardown), 360_000);
  });
}
