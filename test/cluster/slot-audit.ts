import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { createInterface } from 'node:readline';

// ioredis's own key table and slot function: the same ones its cluster client routes with.
const fromIoredis = createRequire(require.resolve('ioredis'));
const commands = fromIoredis('@ioredis/commands') as { exists(name: string): boolean; getKeyIndexes(name: string, args: string[]): number[] };
const keySlot = fromIoredis('cluster-key-slot') as (key: string) => number;

export interface SlotAuditResult {
  /** Script runs seen (each a run of consecutive commands a script issued on one node). */
  scripts: number;
  /** Commands those scripts issued. */
  commands: number;
  /** Scripts whose commands touched more than one slot: the first few, for the failure message. */
  crossSlot: Array<{ node: number; slots: number[]; commands: string[] }>;
}

/**
 * Watches every master with MONITOR for the whole cluster run and checks that each script
 * (BullMQ's, the rate limiter's) touched one slot with every command it issued, keys it did not
 * declare included: a script's commands show as `[0 lua]` lines, one after the other, since a node
 * runs one script at a time. Redis itself only refuses a script's declared keys across slots, or
 * an undeclared key of another node; this also catches one of another slot on the same node.
 */
export function startSlotAudit(ports: number[]): { stop(): Promise<SlotAuditResult> } {
  const result: SlotAuditResult = { scripts: 0, commands: 0, crossSlot: [] };
  const monitors: ChildProcess[] = [];
  const closed: Array<Promise<void>> = [];
  for (const port of ports) {
    const child = spawn('redis-cli', ['-h', '127.0.0.1', '-p', String(port), 'monitor'], { stdio: ['ignore', 'pipe', 'ignore'] });
    monitors.push(child);
    let group: { slots: Set<number>; commands: string[] } | undefined;
    const endGroup = (): void => {
      if (!group) return;
      result.scripts += 1;
      if (group.slots.size > 1 && result.crossSlot.length < 10) {
        result.crossSlot.push({ node: port, slots: [...group.slots], commands: group.commands.slice(0, 20) });
      }
      group = undefined;
    };
    const lines = createInterface({ input: child.stdout! });
    lines.on('line', (line) => {
      const m = /^\d+\.\d+ \[\d+ ([^\]]+)\] (.*)$/.exec(line);
      if (!m) return;
      if (m[1] !== 'lua') return endGroup();
      const args = [...m[2]!.matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((a) => a[1]!.replace(/\\(["\\])/g, '$1'));
      const name = (args.shift() ?? '').toLowerCase();
      group ??= { slots: new Set(), commands: [] };
      result.commands += 1;
      if (group.commands.length < 20) group.commands.push([name, ...args.slice(0, 3)].join(' '));
      if (!commands.exists(name)) return;
      for (const i of commands.getKeyIndexes(name, args)) group.slots.add(keySlot(args[i]!));
    });
    closed.push(new Promise((resolve) => lines.once('close', () => (endGroup(), resolve()))));
  }
  return {
    async stop() {
      for (const m of monitors) m.kill('SIGTERM');
      await Promise.all(closed);
      return result;
    },
  };
}
