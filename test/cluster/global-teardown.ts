// svcTestRedisCluster and svcTestSlotAudit are declared (and set) in global-setup.ts.
export default async function globalTeardown(): Promise<void> {
  const audit = await globalThis.svcTestSlotAudit?.stop();
  globalThis.svcTestSlotAudit = undefined;
  await globalThis.svcTestRedisCluster?.stop();
  globalThis.svcTestRedisCluster = undefined;
  if (!audit) return;
  console.log(`[cluster] slot audit: ${audit.scripts} script runs, ${audit.commands} commands from scripts, ${audit.crossSlot.length} touching more than one slot`);
  if (audit.scripts === 0) throw new Error('slot audit: no script run was seen (is MONITOR working?)');
  if (audit.crossSlot.length) throw new Error(`slot audit: scripts touched more than one slot:\n${JSON.stringify(audit.crossSlot, null, 2)}`);
}
