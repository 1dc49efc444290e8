import { chaosScenario } from './harness';

// The dispatchers lose Postgres for 10 s (the gateway keeps it): fan-outs and attempt records fail
// meanwhile, while the receiver keeps answering. The cut must close connections the dispatchers had
// open, refuse the ones they try meanwhile, and hold back the fan-out of the events committed then.
chaosScenario('Postgres cut for 10 s for the dispatchers', { postgresProxyFor: 'dispatchers' }, async (h) => {
  await h.untilEvents(300);
  const proxy = h.postgresProxy;
  const before = proxy.stats;
  const cutAt = new Date();
  proxy.cut();
  const closed = proxy.stats.dropped - before.dropped;
  await h.sleep(10_000);
  const refused = proxy.stats.refused - before.refused;
  const restoredAt = new Date();
  proxy.restore();
  h.effect('dispatcher connections to Postgres the cut closed', () => closed);
  h.effect('dispatcher connections refused during the cut', () => refused);
  // Committed over a second before the restore: without the cut, their fan-out is long done by then.
  h.effect('events committed during the cut (but its last second) fanned out only after it', () =>
    h.count(`select count(*) n from outbox where created_at >= $1 and created_at < $2::timestamptz - interval '1 second' and repartido_en >= $2`, [cutAt, restoredAt]),
  );
});
