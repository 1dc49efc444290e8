/** The secret a rotation replaced: it signs beside the current one until its overlap ends. */
export interface PreviousSecret {
  /** As its holder has it: sealed in a row (`previousSecretOf`), opened in a target. Never log it. */
  secret: string;
  expiresAt: Date;
}

/**
 * A webhook's previous secret as its row keeps it (`secreto_anterior` and
 * `secreto_anterior_expira_en`, set and cleared together by a rotation), or null when it has none.
 * The end stays with it: the sender compares it with each attempt's time, so a webhook read a
 * while before still stops signing with the previous secret when its overlap ends. The secret is
 * as stored, sealed: `webhookTargetOf` opens it.
 */
export function previousSecretOf(row: { secreto_anterior: string | null; secreto_anterior_expira_en: Date | null }): PreviousSecret | null {
  return row.secreto_anterior !== null && row.secreto_anterior_expira_en !== null
    ? { secret: row.secreto_anterior, expiresAt: row.secreto_anterior_expira_en }
    : null;
}
