// What the dispatcher benchmarks share (bench/dispatcher, bench/retention): child processes spoken
// to over IPC, synthetic shipment events, and the wait on the dispatcher's own delivery counter.
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, openSync } from 'node:fs';
import { randomBytes, randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { Queue } from 'bullmq';
import type pg from 'pg';
import { bulkJobs, JOBS, type ShipmentEventJob } from '@svc/contracts';
import { createSecretBox, loadSettings } from '@svc/platform';

const ROOT = join(__dirname, '..', '..');

export const now = (): number => performance.timeOrigin + performance.now();
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---- child processes ------------------------------------------------------------------------------

export function child(name: string, script: string, env: Record<string, string>, ipc: boolean, nodeArgs: string[] = []): ChildProcess {
  if (!ipc) return spawned(name, [...nodeArgs, '--import', 'tsx', script], env);
  const c = fork(script, [], { cwd: ROOT, env: { ...process.env, ...env }, execArgv: [...nodeArgs, '--import', 'tsx'], stdio: ['ignore', 'ignore', 'pipe', 'ipc'] });
  c.stderr?.on('data', (b: Buffer) => process.stderr.write(`[${name}] ${b.toString()}`));
  return c;
}

/** `node <args>` from the repository's root, without IPC; its stdout discarded, its stderr shown as `[name] ...`. */
export function spawned(name: string, args: string[], env: Record<string, string>): ChildProcess {
  // BENCH_LOG_DIR: each child's stdout (its log lines) in <dir>/<name>.log, to diagnose a run.
  const logDir = process.env.BENCH_LOG_DIR;
  if (logDir) mkdirSync(logDir, { recursive: true });
  const c = spawn(process.execPath, args, {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', logDir ? openSync(join(logDir, `${name}.log`), 'a') : 'ignore', 'pipe'],
  });
  c.stderr?.on('data', (b: Buffer) => process.stderr.write(`[${name}] ${b.toString()}`));
  return c;
}

/** Sends `msg` (unless empty) and resolves with the child's first message that has `key`; rejects if the child exits first. */
export function ask<T>(c: ChildProcess, msg: object, key: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const on = (m: Record<string, unknown>): void => {
      if (key in m) {
        done();
        resolve(m as T);
      }
    };
    const exit = (code: number | null, signal: string | null): void => {
      done();
      reject(new Error(`the child exited (${signal ?? `code ${code}`}) before answering with ${key}`));
    };
    const done = (): void => {
      c.off('message', on);
      c.off('exit', exit);
    };
    if (c.exitCode !== null || c.signalCode !== null) return exit(c.exitCode, c.signalCode);
    c.on('message', on);
    c.on('exit', exit);
    if (Object.keys(msg).length) c.send(msg);
  });
}

// ---- events -----------------------------------------------------------------------------------

/**
 * The company's webhook count as SQL text (`empresaId`: a parameter placeholder), as the gateway's
 * event statement reads it. Written here rather than imported from the gateway so that the script
 * still runs in a tree from before the count (A/B runs), where it is never called.
 */
export const webhooksVersionSql = (empresaId: string): string =>
  `coalesce((select version from webhook_versions where empresa_id = ${empresaId}), 0)`;

/**
 * `webhooksVersion`: the company's webhook count, as the gateway's event carries it; left out for a
 * tree before it existed. `sucursalId`: the branch whose token made the event (its webhooks and the
 * company's receive it), null for the company's own.
 */
export function eventJob(empresaId: string, i: number, committedAt: string, webhooksVersion?: number, sucursalId: string | null = null): ShipmentEventJob {
  return {
    eventId: randomUUID(),
    evento: 'GUIA_CREADA',
    empresaId,
    sucursalId,
    data: { numeroGuia: `SVCBENCH${String(i).padStart(8, '0')}`, estado: 'CREADA' },
    committedAt,
    requestId: randomUUID(),
    ...(webhooksVersion === undefined ? {} : { webhooksVersion }),
  };
}

/**
 * Queues events as the gateway's relay would. With `db`, each first gets its outbox row (marked
 * relayed), as the gateway commits it: a delivery deferred at its first attempt has no job, and the
 * dispatcher queues it again from that row; without one it could never be sent (issue 30: the
 * retry phase's "reached" counts were short by exactly those).
 */
export async function addEvents(queue: Queue<ShipmentEventJob>, jobs: ShipmentEventJob[], db?: Pick<pg.Pool, 'query'>): Promise<void> {
  for (let i = 0; i < jobs.length; i += 1000) {
    const chunk = jobs.slice(i, i + 1000);
    if (db) await insertOutboxRows(db, chunk);
    await queue.addBulk(bulkJobs(JOBS.shipmentEvent, chunk));
  }
}

/** The events' outbox rows in one statement, already relayed (the bench queues them itself). */
async function insertOutboxRows(db: Pick<pg.Pool, 'query'>, jobs: readonly ShipmentEventJob[]): Promise<void> {
  await db.query(
    `insert into outbox (id, empresa_id, sucursal_id, evento, data, request_id, enviado_en)
     select id, empresa_id, sucursal_id, evento, data, request_id, now()
     from unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::text[], $5::jsonb[], $6::text[]) as v(id, empresa_id, sucursal_id, evento, data, request_id)`,
    [
      jobs.map((j) => j.eventId),
      jobs.map((j) => j.empresaId),
      jobs.map((j) => j.sucursalId),
      jobs.map((j) => j.evento),
      jobs.map((j) => JSON.stringify(j.data)),
      jobs.map((j) => j.requestId),
    ],
  );
}

/**
 * Events removed from the queue before any dispatcher took them (`drain`) were never fanned out: their
 * rows are marked done, or the reconciler would queue them again in a later phase. Called once
 * nothing is active, so every row still unfanned is one of those.
 */
export async function settleDrainedOutbox(db: Pick<pg.Pool, 'query'>): Promise<void> {
  await db.query(`update outbox set repartido_en = now() where repartido_en is null and enviado_en is not null`);
}

/**
 * Deliveries the dispatchers at `metricsPorts` have counted finished (their /metrics), summed, of
 * one `outcome` when given; a dispatcher that does not answer counts 0.
 */
export async function deliveredCount(metricsPorts: readonly number[], outcome?: 'success' | 'failure'): Promise<number> {
  let n = 0;
  for (const port of metricsPorts) {
    try {
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      for (const m of text.matchAll(/^svc_webhook_deliveries_total\{([^}]*)\} (\d+)/gm)) {
        if (outcome === undefined || m[1]!.includes(`outcome="${outcome}"`)) n += Number(m[2]);
      }
    } catch {}
  }
  return n;
}

/**
 * Waits until the dispatcher (or the dispatchers, summed) has counted `expected` finished
 * deliveries (its counter moves only after a delivery's record has committed), reading its /metrics
 * rather than polling Postgres, so the wait adds no load to what is measured. The caller checks the
 * database afterwards.
 */
export async function waitDelivered(metricsPort: number | readonly number[], expected: number, timeoutMs: number, pollMs = 100): Promise<number> {
  const ports = typeof metricsPort === 'number' ? [metricsPort] : metricsPort;
  const until = Date.now() + timeoutMs;
  for (;;) {
    const n = await deliveredCount(ports);
    if (n >= expected) return now();
    if (Date.now() > until) throw new Error(`only ${n} of ${expected} deliveries finished`);
    await sleep(pollMs);
  }
}

/**
 * A verified company written straight into the bench database with `count` webhooks subscribed to
 * everything, pointing at the bench receiver (`https://receiver.test:<port><path>`, with `/<i>`
 * appended when there are several).
 */
export async function benchWebhooks(
  db: Pick<pg.Client, 'query'>,
  opts: { nombre: string; receiverPort: number; count?: number; path?: string },
): Promise<{ empresaId: string; webhookIds: string[]; webhooksVersion: number | undefined }> {
  const count = opts.count ?? 1;
  const path = opts.path ?? '/hook';
  const empresaId = (await db.query<{ id: string }>(`insert into empresas (nombre, verificada) values ($1, true) returning id`, [opts.nombre])).rows[0]!.id;
  const webhookIds: string[] = [];
  // Sealed as a gateway would (SECRETS_KEY from the environment the services get, else the
  // development key): a dispatcher already running opens it; one started later finds it sealed.
  const secrets = createSecretBox(loadSettings('bench', process.env, () => ({})).secretsKeys);
  for (let i = 0; i < count; i++) {
    const url = `https://receiver.test:${opts.receiverPort}${path}${count > 1 ? `/${i}` : ''}`;
    const id = randomUUID();
    const w = await db.query<{ id: string }>(`insert into webhooks (id, empresa_id, url, secret, eventos) values ($1, $2, $3, $4, '{}') returning id`, [
      id,
      empresaId,
      url,
      secrets.seal(id, `whsec_${randomBytes(32).toString('base64url')}`),
    ]);
    webhookIds.push(w.rows[0]!.id);
  }
  // The count the gateway's events would carry; none in a tree from before it (an A/B run of this
  // script against an earlier commit), whose job contract refuses the field.
  const counted = (await db.query<{ t: string | null }>(`select to_regclass('webhook_versions')::text as t`)).rows[0]?.t != null;
  const webhooksVersion = counted ? Number((await db.query<{ v: string }>(`select ${webhooksVersionSql('$1')} as v`, [empresaId])).rows[0]!.v) : undefined;
  return { empresaId, webhookIds, webhooksVersion };
}
