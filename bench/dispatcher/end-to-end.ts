// The end-to-end phase of `pnpm bench:dispatcher`: shipments created through the gateway's API
// (`POST /api/v1/guias/batch` with the fleet's live branch tokens, at the contract's rate limit),
// committed with their events, relayed, fanned out and delivered to receivers that take their
// time; timed from the integrator's side (request sent, 201 back) to each webhook's receipt.
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { Agent, request } from 'undici';
import { peakRssMb, resetPeakRss, serviceArgs, stopChild } from '../support/bench-process';
import { admin, waitFor } from '../support/gateway-bench';
import { ask, deliveredCount, now, spawned, waitDelivered } from '../support/dispatcher-bench';
import type { Fleet } from '../support/fleet';
import { ascending, configureReceiver, loadMeter, ms, paced, pct, perDelivery, printLoad, type Bench, type Load, type Memory } from './bench';
import { E2E_BATCH, E2E_LATENCY_MS, E2E_LEAD_SECONDS, E2E_RATE, E2E_SECONDS, GATEWAY_METRICS_PORT, GATEWAY_PORT, METRICS_PORT, PREFIX, REDIS_URL } from './settings';

const ADMIN = `bench-admin-${randomBytes(12).toString('hex')}`;
/** Tokens issued at once while the phase is set up. */
const ISSUING = 8;

export interface EndToEnd {
  /** Shipments per second created over the measured part (as the bench managed them). */
  achieved: number;
  shipments: number;
  received: number;
  /** Batch request: sent → 201, ms. */
  request: number[];
  /** Per shipment, to its webhook's receipt (arrival): from the request sent, from its 201. */
  sentToReceipt: number[];
  createdToReceipt: number[];
  refused: number;
  /** Gateway CPU ms per measured shipment. */
  gatewayCpu: number;
  load: Load;
  memory: Memory;
}

/** A shipment of the batch body: the single creation's fields (bench/support/gateway-bench.ts). */
const SHIPMENT = {
  destinatario: { nombre: 'Cliente Bench', telefono: '+502 5555 0000', direccion: '6a Avenida 10-20, Zona 1' },
  paquete: { peso: 2.5 },
  referencia: 'BENCH',
};

/**
 * Starts the gateway (its relay finds no unsent outbox row: the bench's own are marked sent first),
 * issues a live token for every branch of the fleet through the internal routes, then sends batches
 * at E2E_RATE shipments per second: E2E_LEAD_SECONDS not measured, E2E_SECONDS measured, each
 * request with the next branch's token; waits until every shipment has been delivered.
 */
export async function endToEnd(b: Bench, fleet: Fleet): Promise<EndToEnd> {
  await b.check.query(`update outbox set enviado_en = now() where enviado_en is null`);
  const base = `http://127.0.0.1:${GATEWAY_PORT}`;
  const gateway: ChildProcess = spawned('gateway', serviceArgs('gateway', b.build), {
    DATABASE_URL: b.databaseUrl,
    REDIS_URL,
    REDIS_PREFIX: PREFIX,
    PORT: String(GATEWAY_PORT),
    GATEWAY_METRICS_PORT: String(GATEWAY_METRICS_PORT),
    ADMIN_TOKEN: ADMIN,
    LOG_LEVEL: 'warn',
  });
  const agent = new Agent({ connections: 64, keepAliveTimeout: 30_000 });
  try {
    await waitFor(`http://127.0.0.1:${GATEWAY_METRICS_PORT}/readyz`, (s) => s === 200);
    const tokens: string[] = new Array<string>(fleet.webhooks.length);
    for (let i = 0; i < fleet.webhooks.length; i += ISSUING) {
      await Promise.all(
        fleet.webhooks.slice(i, i + ISSUING).map(async (w, j) => {
          const issued = await admin<{ live: string }>(base, ADMIN, 'POST', `/empresas/${w.empresaId}/sucursales/${w.sucursalId}/tokens`);
          tokens[i + j] = issued.live;
        }),
      );
    }
    // Consecutive requests go to different companies (the fleet's webhooks are company by company).
    const perCompany = fleet.webhooks.length / fleet.companies;
    const order = Array.from({ length: tokens.length }, (_, i) => tokens[(i % fleet.companies) * perCompany + Math.floor(i / fleet.companies)]!);
    await configureReceiver(b, E2E_LATENCY_MS, []);
    const body = JSON.stringify({ guias: Array.from({ length: E2E_BATCH }, () => SHIPMENT) });
    const requestRate = E2E_RATE / E2E_BATCH;
    let turn = 0;
    let refused = 0;
    const requestTimes: number[] = [];
    /** numeroGuia → [request sent, 201 back]. */
    const created = new Map<string, [number, number]>();
    const send = async (measured: boolean): Promise<void> => {
      const token = order[turn++ % order.length]!;
      const sent = now();
      const res = await request(`${base}/api/v1/guias/batch`, {
        method: 'POST',
        dispatcher: agent,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body,
      });
      const json = (await res.body.json()) as { data?: { guias?: Array<{ numeroGuia: string }> } };
      const back = now();
      if (res.statusCode !== 201) {
        refused++;
        return;
      }
      if (!measured) return;
      requestTimes.push(back - sent);
      for (const g of json.data?.guias ?? []) created.set(g.numeroGuia, [sent, back]);
    };

    const lead = Math.round(requestRate * E2E_LEAD_SECONDS);
    const measuredRequests = Math.round(requestRate * E2E_SECONDS);
    const gatewayPid = gateway.pid!;
    resetPeakRss(gatewayPid);
    if (b.dispatcher?.pid) resetPeakRss(b.dispatcher.pid);
    await ask(b.receiver, { cmd: 'peak' }, 'peakInFlight');
    await paced(requestRate, lead, () => send(false));
    await ask(b.receiver, { cmd: 'record', parse: true }, 'ok');
    const groups = b.cpuGroups;
    b.cpuGroups = { ...groups, gateway: gatewayPid };
    const countedBefore = await deliveredCount([METRICS_PORT]);
    const meter = await loadMeter(b);
    b.cpuGroups = groups;
    const seconds = await paced(requestRate, measuredRequests, () => send(true));
    const shipments = (lead + measuredRequests - refused) * E2E_BATCH;
    b.delivered += shipments;
    await waitDelivered(METRICS_PORT, b.delivered, 300_000);
    // Per delivery: those that ended from the first measured request until the last measured one's (the lead's backlog included).
    const load = await meter((await deliveredCount([METRICS_PORT])) - countedBefore);
    const gatewayCpu = ((load.cpu.used.gateway ?? NaN) * 1000) / created.size;
    const memory: Memory = {
      rss: { gateway: peakRssMb(gatewayPid), ...(b.dispatcher?.pid ? { dispatcher: peakRssMb(b.dispatcher.pid) } : {}) },
      peakInFlight: (await ask<{ peakInFlight: number }>(b.receiver, { cmd: 'peak' }, 'peakInFlight')).peakInFlight,
    };
    const { receipts } = await ask<{ receipts: Array<[string, number, string?]> }>(b.receiver, { cmd: 'receipts' }, 'receipts');
    const sentToReceipt: number[] = [];
    const createdToReceipt: number[] = [];
    const seen = new Set<string>();
    for (const [, at, numero] of receipts) {
      const times = numero === undefined ? undefined : created.get(numero);
      if (!times || seen.has(numero!)) continue;
      seen.add(numero!);
      sentToReceipt.push(at - times[0]);
      createdToReceipt.push(at - times[1]);
    }
    // Where the tail is: the event's commit (outbox.created_at, Postgres's clock, the machine's) to
    // its relay into the queue (enviado_en), and the relay to its first receipt.
    const receivedAt = new Map<string, number>();
    for (const [, at, numero] of receipts) if (numero !== undefined && created.has(numero) && !receivedAt.has(numero)) receivedAt.set(numero, at);
    const outbox = await b.pool.query<{ numero: string; committed: number; relayed: number | null }>(
      `select data->>'numeroGuia' as numero, extract(epoch from created_at) * 1000 as committed, extract(epoch from enviado_en) * 1000 as relayed from outbox where data->>'numeroGuia' = any($1)`,
      [[...receivedAt.keys()]],
    );
    const commitToRelay: number[] = [];
    const relayToReceipt: number[] = [];
    for (const row of outbox.rows) {
      if (row.relayed === null) continue;
      commitToRelay.push(Number(row.relayed) - Number(row.committed));
      relayToReceipt.push(receivedAt.get(row.numero)! - Number(row.relayed));
    }
    const result: EndToEnd = {
      achieved: (measuredRequests * E2E_BATCH) / seconds,
      shipments: created.size,
      received: seen.size,
      request: ascending(requestTimes),
      sentToReceipt: ascending(sentToReceipt),
      createdToReceipt: ascending(createdToReceipt),
      refused,
      gatewayCpu,
      load,
      memory,
    };
    const p = (xs: number[]): string => `p50 ${ms(pct(xs, 50))} ms, p99 ${ms(pct(xs, 99))} ms, max ${ms(xs[xs.length - 1])} ms`;
    console.log(
      `  end to end: ${measuredRequests} batches of ${E2E_BATCH} (POST /api/v1/guias/batch, ${tokens.length} live branch tokens, the contract's rate limit) ` +
        `in ${seconds.toFixed(1)} s = ${Math.round(result.achieved)} shipments/s` +
        `${result.achieved < 0.95 * E2E_RATE ? ' (BEHIND the rate asked)' : ''} after ${E2E_LEAD_SECONDS} s not measured; ${refused} refused (not 201); ` +
        `${result.received} of ${result.shipments} shipments' deliveries received, receivers answering after ${E2E_LATENCY_MS} ms`,
    );
    console.log(`    batch request, sent → 201: ${p(result.request)}`);
    console.log(`    shipment, request sent → webhook receipt: ${p(result.sentToReceipt)}; its 201 → receipt: ${p(result.createdToReceipt)}`);
    console.log(`    event, commit → relayed to the queue: ${p(ascending(commitToRelay))}; relayed → receipt: ${p(ascending(relayToReceipt))}`);
    console.log(
      `    gateway CPU per shipment ${gatewayCpu.toFixed(3)} ms, dispatcher CPU per delivery ${perDelivery(load, 'dispatcher').toFixed(3)} ms; ` +
        `peak RSS gateway ${memory.rss.gateway} MB, dispatcher ${memory.rss.dispatcher ?? '-'} MB; at most ${memory.peakInFlight} requests held by the receivers at once`,
    );
    await printLoad(b, load, "Postgres and Redis serve the gateway's creations and the dispatcher's deliveries");
    return result;
  } finally {
    await agent.close();
    await stopChild(gateway, 10_000);
  }
}
