// The dispatcher bench's tenants as real ones look: many companies, each on its own origin, each
// with branches that have their own webhook, written straight into the bench database; and the
// feeder that keeps the events queue full while a phase is saturated.
import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import type { Queue } from 'bullmq';
import type { ShipmentEventJob } from '@svc/contracts';
import { addEvents, eventJob, sleep, webhooksVersionSql } from './dispatcher-bench';

export interface FleetWebhook {
  empresaId: string;
  sucursalId: string;
  webhookId: string;
  /** The webhook URL's path on the receiver (`/fleet/<company>/<branch>`). */
  path: string;
  /** The company's webhook count (the events carry it). */
  webhooksVersion: number | undefined;
}

export interface Fleet {
  companies: number;
  /** Every webhook, company by company. */
  webhooks: FleetWebhook[];
}

/**
 * `companies` verified companies with branches enabled, an active plan, credits and a daily limit
 * that no bench reaches; each with `perCompany` branches, and each branch with one webhook of its
 * own (`https://receiver.test:<portBase + company>/fleet/<company>/<branch>`, every event). An event
 * made with a branch's token reaches that branch's webhook alone (the company has none of its own),
 * so every event is one delivery, and the load spreads over every webhook and origin.
 */
export async function createFleet(db: Pick<pg.Client, 'query'>, opts: { companies: number; perCompany: number; portBase: number }): Promise<Fleet> {
  const { companies, perCompany, portBase } = opts;
  const empresas = await db.query<{ id: string; nombre: string }>(
    `insert into empresas (nombre, verificada, sucursales_habilitadas, limite_diario, plan_activo, creditos)
     select 'Fleet ' || g, true, true, 100000000, true, 1000000000 from generate_series(0, $1 - 1) g returning id, nombre`,
    [companies],
  );
  const companyIds: string[] = [];
  for (const r of empresas.rows) companyIds[Number(r.nombre.slice('Fleet '.length))] = r.id;
  const sucursales = await db.query<{ id: string; empresa_id: string; nombre: string }>(
    `insert into sucursales (empresa_id, nombre)
     select e, 'Branch ' || k from unnest($1::uuid[]) e, generate_series(0, $2 - 1) k returning id, empresa_id, nombre`,
    [companyIds, perCompany],
  );
  const branchOf = new Map(sucursales.rows.map((r) => [`${r.empresa_id}/${r.nombre.slice('Branch '.length)}`, r.id]));
  const rows: Array<Omit<FleetWebhook, 'webhookId' | 'webhooksVersion'> & { url: string }> = [];
  companyIds.forEach((empresaId, c) => {
    for (let k = 0; k < perCompany; k++) {
      const path = `/fleet/${c}/${k}`;
      rows.push({ empresaId, sucursalId: branchOf.get(`${empresaId}/${k}`)!, path, url: `https://receiver.test:${portBase + c}${path}` });
    }
  });
  const webhooks = await db.query<{ id: string; url: string }>(
    `insert into webhooks (empresa_id, sucursal_id, url, secret, eventos)
     select * , '{}'::text[] from unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[]) returning id, url`,
    [rows.map((r) => r.empresaId), rows.map((r) => r.sucursalId), rows.map((r) => r.url), rows.map(() => `whsec_${randomBytes(32).toString('base64url')}`)],
  );
  const idOf = new Map(webhooks.rows.map((r) => [r.url, r.id]));
  const counted = (await db.query<{ t: string | null }>(`select to_regclass('webhook_versions')::text as t`)).rows[0]?.t != null;
  const versions = new Map<string, number>();
  if (counted) {
    for (const id of companyIds) versions.set(id, Number((await db.query<{ v: string }>(`select ${webhooksVersionSql('$1')} as v`, [id])).rows[0]!.v));
  }
  return {
    companies,
    webhooks: rows.map((r) => ({ empresaId: r.empresaId, sucursalId: r.sucursalId, webhookId: idOf.get(r.url)!, path: r.path, webhooksVersion: versions.get(r.empresaId) })),
  };
}

/**
 * Events to the fleet's webhooks in turn, company after company (webhook i, i + perCompany... so
 * that consecutive events go to different companies and origins), each one delivery.
 */
export function fleetEvents(fleet: Fleet, perCompany: number, numbering: { next: number }): (committedAt?: string) => ShipmentEventJob {
  const order: FleetWebhook[] = [];
  for (let k = 0; k < perCompany; k++) for (let c = 0; c < fleet.companies; c++) order.push(fleet.webhooks[c * perCompany + k]!);
  let turn = 0;
  return (committedAt = new Date().toISOString()) => {
    const w = order[turn++ % order.length]!;
    return eventJob(w.empresaId, numbering.next++, committedAt, w.webhooksVersion, w.sucursalId);
  };
}

/** The paths of `percent`% of the fleet's webhooks, spread evenly over it (one in every 100 / percent). */
export function someOf(fleet: Fleet, percent: number): string[] {
  if (percent <= 0) return [];
  const every = Math.max(1, Math.round(100 / percent));
  return fleet.webhooks.filter((_, i) => i % every === Math.floor(every / 2)).map((w) => w.path);
}

export interface Feeder {
  /** Events added so far. */
  added(): number;
  /** Stops adding (after the add under way, if any). */
  stop(): Promise<void>;
}

/**
 * Keeps the events queue saturated: whenever fewer than `low` events wait, adds `chunk` more (made
 * by `next`), looking every `everyMs`. The dispatcher then never lacks work, whatever its rate,
 * and what it has not taken when the phase ends is drained from the queue.
 */
export function startFeeder(
  queue: Queue<ShipmentEventJob>,
  next: () => ShipmentEventJob,
  opts: { low?: number; chunk?: number; everyMs?: number; db?: Pick<pg.Pool, 'query'> } = {},
): Feeder {
  const low = opts.low ?? 3000;
  const chunk = opts.chunk ?? 1000;
  const everyMs = opts.everyMs ?? 100;
  let running = true;
  let added = 0;
  const loop = (async () => {
    while (running) {
      const waiting = await queue.getWaitingCount();
      if (waiting < low) {
        await addEvents(queue, Array.from({ length: chunk }, next), opts.db);
        added += chunk;
      } else {
        await sleep(everyMs);
      }
    }
  })();
  return {
    added: () => added,
    stop: async () => {
      running = false;
      await loop;
    },
  };
}
