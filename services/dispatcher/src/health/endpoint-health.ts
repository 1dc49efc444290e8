import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Queue } from 'bullmq';
import {
  bulkJobs,
  DELIVERY_MAX_ATTEMPTS,
  JOBS,
  type AutoDisableReason,
  type DeliveryJob,
  type NoticeEvent,
  type ShipmentEventJob,
  type WebhookNoticeData,
} from '@svc/contracts';
import {
  autoDeactivateWebhook,
  claimFailingNotice,
  insertNotice,
  recordHealth,
  type Db,
  type DisableRule,
  type EndedDelivery,
  type FailingWebhook,
  type PendingJob,
} from '@svc/platform';
import type { Logger } from '@svc/observability';
import { attemptOperatorNotice, type WebhookSender } from '@svc/webhook-sender';
import { answeredAlways } from '../deliveries/delivery.repository';
import { recordAutoDeactivation } from '../activity/activity.repository';
import { retryDelayMs } from '../retry-policy/delivery-retry.policy';

/** The Standard Webhooks signal that an endpoint is gone for good. */
const GONE_STATUS = 410;

/** WEBHOOK_FALLANDO goes out at most once per this per webhook (extensions.md). */
const FAILING_NOTICE_EVERY_MS = 24 * 3_600_000;

/**
 * Ended deliveries wait up to this long to be counted together: one statement per batch writes each
 * webhook's row once, so a busy webhook is written a few times a second at most, and the wait delays
 * only its health (never a delivery).
 */
const FLUSH_MS = 100;
/** Ended deliveries per statement at most. */
const MAX_BATCH = 1000;

export interface EndpointHealth {
  /** A delivery ended (its last attempt recorded): counted in its webhook's health. Never throws, never waits. */
  ended(delivery: Pick<DeliveryJob, 'deliveryId' | 'webhookId' | 'evento'>, outcome: { ok: boolean; at: number; statusCode: number }): void;
  /** Counts what is waiting and waits for it (its notices queued); operator notices still retrying are left. */
  drain(): Promise<void>;
}

export interface EndpointHealthDeps {
  db: Db;
  sender: WebhookSender;
  eventsQueue: Pick<Queue<ShipmentEventJob>, 'addBulk'>;
  logger: Logger;
  /** svc_webhooks_auto_disabled_total. */
  autoDisabled: { inc(labels: { motivo: AutoDisableReason }): void };
  rule: DisableRule;
  /** OPERATOR_NOTIFY_URL and its secret; undefined: no operator notice. */
  operator: { url: string; secret: string } | undefined;
  /** Waits between an operator notice's attempts. Default: the deliveries' (1 s, 2 s). */
  operatorRetryMs?: (attempt: number) => number;
}

/**
 * The health of endpoints (extensions.md, Endpoint health and automatic deactivation), kept from the
 * deliveries as they end: the settle stage hands each ended delivery here, and every FLUSH_MS one
 * statement adds them to their webhooks' rows (`recordHealth`). Only a batch with a failure leads
 * to more: a webhook failing without a break for `rule.afterMs` with `rule.minFailures` failures, or
 * a delivery whose every attempt answered 410, is deactivated as DELETE does it (written to the
 * activity log as `sistema`, counted, WEBHOOK_DESACTIVADO); one that reached `minFailures` gets
 * WEBHOOK_FALLANDO once a day. Notices are events of the log, routed and delivered as any other,
 * and POSTed to the operator when OPERATOR_NOTIFY_URL is set. A healthy webhook costs its share of
 * one statement per batch; the health is a count kept on a best effort (a batch lost with a crash
 * or a failed statement is not counted, and logged), never a reason to hold a delivery.
 */
export function createEndpointHealth(deps: EndpointHealthDeps): EndpointHealth {
  const { db, logger, rule } = deps;
  let pending: EndedDelivery[] = [];
  // Deliveries that ended failed with a 410 on their last attempt: the GONE rule reads their attempts.
  let goneCandidates: Array<{ deliveryId: string; webhookId: string }> = [];
  let timer: NodeJS.Timeout | undefined;
  let chain: Promise<void> = Promise.resolve();
  let closing = false;

  function flush(): Promise<void> {
    if (timer) clearTimeout(timer);
    timer = undefined;
    const batch = pending;
    const gone = goneCandidates;
    pending = [];
    goneCandidates = [];
    if (batch.length === 0) return chain;
    chain = chain.then(() => apply(batch, gone)).catch((err: unknown) => logger.warn({ deliveries: batch.length, err: (err as Error).message }, 'endpoint health not recorded for a batch'));
    return chain;
  }

  async function apply(batch: EndedDelivery[], gone: Array<{ deliveryId: string; webhookId: string }>): Promise<void> {
    const [failing, goneIds] = await Promise.all([
      recordHealth(db, batch),
      answeredAlways(
        db,
        gone.map((g) => g.deliveryId),
        GONE_STATUS,
        DELIVERY_MAX_ATTEMPTS,
      ),
    ]);
    const goneWebhooks = new Set(gone.filter((g) => goneIds.has(g.deliveryId)).map((g) => g.webhookId));
    for (const w of failing) {
      if (!w.activo) continue;
      const motivo = goneWebhooks.has(w.id) ? 'GONE' : continuousFailure(w) ? 'FALLAS_CONTINUAS' : null;
      if (motivo) await deactivate(w, motivo);
      else if (w.fallas >= rule.minFailures && (w.avisoEn === null || w.now.getTime() - w.avisoEn.getTime() >= FAILING_NOTICE_EVERY_MS)) await warnFailing(w);
    }
  }

  const continuousFailure = (w: FailingWebhook): boolean =>
    w.fallas >= rule.minFailures && w.fallandoDesde !== null && w.now.getTime() - w.fallandoDesde.getTime() >= rule.afterMs;

  const noticeData = (w: Pick<FailingWebhook, 'id' | 'url' | 'descripcion'>, motivo: AutoDisableReason | null, fallas: number, desde: Date | null): WebhookNoticeData => ({
    webhook: { id: w.id, url: w.url, descripcion: w.descripcion },
    motivo,
    fallasConsecutivas: fallas,
    desde: desde?.toISOString() ?? null,
  });

  const notice = (w: FailingWebhook, evento: NoticeEvent, data: WebhookNoticeData) => ({
    eventId: randomUUID(),
    evento,
    empresaId: w.empresaId,
    sucursalId: w.sucursalId,
    mode: w.modo,
    data,
  });

  async function deactivate(w: FailingWebhook, motivo: AutoDisableReason): Promise<void> {
    const done = await db.transaction().execute(async (trx) => {
      const row = await autoDeactivateWebhook(trx, w.id, motivo, rule);
      if (!row) return undefined;
      await recordAutoDeactivation(trx, { empresaId: row.empresa_id, sucursalId: row.sucursal_id, webhookId: row.id, motivo });
      const job = await insertNotice(trx, notice(w, 'WEBHOOK_DESACTIVADO', noticeData(row, motivo, row.salud_fallas, row.salud_fallando_desde)));
      return { job, fallas: row.salud_fallas };
    });
    if (!done) return;
    deps.autoDisabled.inc({ motivo });
    logger.warn({ webhook: w.id, empresaId: w.empresaId, motivo, fallasConsecutivas: done.fallas }, 'webhook deactivated by the platform');
    await publish(done.job);
  }

  async function warnFailing(w: FailingWebhook): Promise<void> {
    const job = await db.transaction().execute(async (trx) => {
      if (!(await claimFailingNotice(trx, w.id, rule.minFailures, FAILING_NOTICE_EVERY_MS))) return undefined;
      return insertNotice(trx, notice(w, 'WEBHOOK_FALLANDO', noticeData(w, null, w.fallas, w.fallandoDesde)));
    });
    if (!job) return;
    logger.warn({ webhook: w.id, empresaId: w.empresaId, fallasConsecutivas: w.fallas }, 'webhook failing');
    await publish(job);
  }

  /** The notice's job, right after its commit (the reconciler queues it if this fails), and the operator's POST. */
  async function publish(pendingJob: PendingJob): Promise<void> {
    const job: ShipmentEventJob = { ...pendingJob, committedAt: new Date().toISOString() };
    await deps.eventsQueue.addBulk(bulkJobs(JOBS.shipmentEvent, [job])).catch((err: unknown) => {
      logger.warn({ eventId: job.eventId, evento: job.evento, err: (err as Error).message }, 'notice not queued; the reconciler will');
    });
    if (deps.operator) void notifyOperator(deps.operator, job);
  }

  /** The operator's copy: up to the deliveries' 3 attempts, spaced as theirs; not recorded (the log has the event). */
  async function notifyOperator(operator: { url: string; secret: string }, job: ShipmentEventJob): Promise<void> {
    const waitMs = deps.operatorRetryMs ?? retryDelayMs;
    for (let attempt = 1; ; attempt++) {
      const outcome = await attemptOperatorNotice(deps.sender, {
        url: operator.url,
        secret: operator.secret,
        noticeId: job.eventId,
        event: job.evento,
        empresaId: job.empresaId,
        data: job.data,
        mode: job.mode ?? 'live',
      }).catch((err: unknown) => ({ ok: false as const, statusCode: 0, message: (err as Error).message }));
      if (outcome.ok) return;
      if (attempt >= DELIVERY_MAX_ATTEMPTS || closing) {
        logger.warn({ eventId: job.eventId, evento: job.evento, statusCode: outcome.statusCode, reason: outcome.message }, 'operator notice failed');
        return;
      }
      await sleep(waitMs(attempt));
    }
  }

  return {
    ended(delivery, outcome) {
      // A PING (its resends too) is a test of the endpoint, not a delivery of the health's.
      if (delivery.evento === 'PING') return;
      pending.push({ webhookId: delivery.webhookId, ok: outcome.ok, at: new Date(outcome.at) });
      if (!outcome.ok && outcome.statusCode === GONE_STATUS) goneCandidates.push({ deliveryId: delivery.deliveryId, webhookId: delivery.webhookId });
      if (pending.length >= MAX_BATCH) void flush();
      else timer ??= setTimeout(() => void flush(), FLUSH_MS).unref();
    },
    async drain() {
      closing = true;
      await flush();
    },
  };
}
