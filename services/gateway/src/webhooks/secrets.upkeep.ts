import {
  createPeriodicTask,
  eraseEndedPreviousSecrets,
  SEALING_BATCH,
  sealStoredSecrets,
  UNOPENED_MESSAGE,
  type Db,
  type SecretBox,
} from '@svc/platform';
import type { Logger } from '@svc/observability';

export interface SecretsUpkeep {
  /** A first pass after `firstDelayMs`, then one every `intervalMs`. */
  start(): void;
  /** One pass now: previous secrets erased, plaintext values sealed, values left unopened. */
  runOnce(): Promise<{ erased: number; sealed: number; unopened: number }>;
  /** Ends a pass in progress after its current batch; no new one starts. */
  stop(): Promise<void>;
}

export interface SecretsUpkeepOptions {
  db: Db;
  secrets: SecretBox;
  logger: Logger;
  /** Between two passes. Default INTERVAL_MS. */
  intervalMs?: number;
  /** Before the first pass. Default: `intervalMs`. */
  firstDelayMs?: number;
}

/**
 * A pass a minute: a previous secret stays at rest at most this long after its overlap ends (it
 * stopped signing at the end itself), and a webhook written in plaintext by a gateway of an earlier
 * version during a rolling upgrade waits at most this long for its first delivery. Two indexed
 * reads of nearly empty partial indexes when there is nothing to do.
 */
const INTERVAL_MS = 60_000;

/**
 * The gateway's upkeep of the secrets it writes (docs/decisions/0006-secrets-sealed-at-rest.md):
 * erases previous secrets once their overlap has ended, and seals any value still stored in
 * plaintext. Values sealed under an older key are re-sealed by starts only, never here: during a
 * rolling change of SECRETS_KEY, processes with the keys in another order would undo each other's
 * work. Any number of gateways may run it.
 */
export function createSecretsUpkeep(options: SecretsUpkeepOptions): SecretsUpkeep {
  const { db, secrets, logger } = options;
  const intervalMs = options.intervalMs ?? INTERVAL_MS;
  // runOnce is a function declaration (hoisted): the task may name it before its text.
  const task = createPeriodicTask({ name: 'secrets upkeep', logger, intervalMs, firstDelayMs: options.firstDelayMs, run: runOnce });

  async function runOnce(): Promise<{ erased: number; sealed: number; unopened: number }> {
    let erased = 0;
    for (let n = SEALING_BATCH; n === SEALING_BATCH && !task.stopped(); ) {
      n = await eraseEndedPreviousSecrets(db);
      erased += n;
    }
    const report = await sealStoredSecrets(db, secrets, { plaintextOnly: true, wait: false });
    if (erased > 0) logger.info({ webhooks: erased }, 'previous secrets past their overlap erased');
    if (report.sealed > 0) logger.warn({ values: report.sealed }, 'webhook secrets found in plaintext sealed (written by an earlier version?)');
    for (const u of report.unopened) logger.error(u, UNOPENED_MESSAGE);
    return { erased, sealed: report.sealed, unopened: report.unopened.length };
  }

  return { start: task.start, runOnce, stop: task.stop };
}
