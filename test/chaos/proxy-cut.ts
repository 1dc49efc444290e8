import type { TcpProxy } from '../support/tcp-proxy';
import type { Chaos } from './harness';

/** How long a cut scenario keeps its proxy cut: long enough for every pool and client to notice. */
export const CUT_MS = 10_000;

/**
 * Cuts `proxy` for CUT_MS once the stream has committed 300 events, then mends it, and declares what the
 * cut must have done: close open connections, refuse new ones, and cost answers (5xx or none).
 */
export async function cutProxyUnderLoad(h: Chaos, proxy: TcpProxy, effects: { closed: string; refused: string }): Promise<void> {
  await h.untilEvents(300);
  const before = { ...proxy.stats, ...h.answers() };
  proxy.cut();
  const closed = proxy.stats.dropped - before.dropped;
  await h.sleep(CUT_MS);
  const refused = proxy.stats.refused - before.refused;
  proxy.restore();
  h.effect(effects.closed, () => closed);
  h.effect(effects.refused, () => refused);
  h.effect('requests answered 5xx or not at all from the cut on', () => {
    const now = h.answers();
    return now.status5xx - before.status5xx + now.unanswered - before.unanswered;
  });
}
