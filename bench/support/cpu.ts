import { readdirSync, readFileSync } from 'node:fs';

// /proc/<pid>/stat counts CPU time in clock ticks; Linux reports 100 per second.
const TICKS_PER_SECOND = 100;

function ticksOf(pid: number): { comm: string; ticks: number; sys: number } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const close = stat.lastIndexOf(')');
    const comm = stat.slice(stat.indexOf('(') + 1, close);
    const fields = stat.slice(close + 2).split(' ');
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after "pid (comm) ".
    return { comm, ticks: Number(fields[11]) + Number(fields[12]), sys: Number(fields[12]) };
  } catch {
    return undefined;
  }
}

/** CPU seconds used so far by each group: given pids, plus every process whose name matches. */
export function cpuSnapshot(groups: Record<string, number | RegExp>): Record<string, number> {
  const out: Record<string, number> = {};
  const byName = Object.entries(groups).filter((e): e is [string, RegExp] => e[1] instanceof RegExp);
  for (const [name, pid] of Object.entries(groups)) {
    out[name] = 0;
    if (typeof pid === 'number') {
      const t = ticksOf(pid);
      out[name] = (t?.ticks ?? 0) / TICKS_PER_SECOND;
      // Kernel time of the process (socket writes, wake-ups), reported apart.
      out[`${name}.sys`] = (t?.sys ?? 0) / TICKS_PER_SECOND;
    }
  }
  if (byName.length) {
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      const t = ticksOf(Number(entry));
      if (!t) continue;
      for (const [name, re] of byName) if (re.test(t.comm)) out[name]! += t.ticks / TICKS_PER_SECOND;
    }
  }
  out.bench = (process.cpuUsage().user + process.cpuUsage().system) / 1e6;
  // The whole machine (all cores), to tell our load from everyone else's.
  const cpu = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = cpu;
  out.machine = (user + nice + system + irq + softirq + steal) / TICKS_PER_SECOND;
  out.idle = (idle + iowait) / TICKS_PER_SECOND;
  return out;
}

/** Percent of one core used by each group between two snapshots. */
export function cpuPercent(before: Record<string, number>, after: Record<string, number>, seconds: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (const k of Object.keys(after)) out[k] = Math.round(((after[k]! - (before[k] ?? 0)) / seconds) * 100);
  const ours = Object.entries(out)
    .filter(([k]) => k !== 'machine' && k !== 'idle' && !k.endsWith('.sys'))
    .reduce((sum, [, v]) => sum + v, 0);
  out.others = Math.max(0, (out.machine ?? 0) - ours);
  return out;
}

/**
 * CPU seconds used so far by each process whose name matches `re`, by pid. The difference of two of
 * these over the pids alive at the second (a pid new since the first counts whole) is the group's
 * use between them without the drop a summed snapshot shows when a process (a Postgres backend
 * whose client closed) exits in between; what such a process used since the first is left out.
 */
export function cpuByPid(re: RegExp): Map<number, number> {
  const out = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const t = ticksOf(Number(entry));
    if (t && re.test(t.comm)) out.set(Number(entry), t.ticks / TICKS_PER_SECOND);
  }
  return out;
}

/** CPU seconds the processes of `after` used since `before` (see cpuByPid). */
export function cpuSinceByPid(before: Map<number, number>, after: Map<number, number>): number {
  let used = 0;
  for (const [pid, seconds] of after) used += Math.max(0, seconds - (before.get(pid) ?? 0));
  return used;
}

/** Context switches of a process so far: `sleeps` (voluntary: it waited for I/O or a timer), `preemptions` (involuntary). */
export interface Switches {
  sleeps: number;
  preemptions: number;
}

/**
 * Starts counting the context switches of `pid`'s main thread (the event loop's; V8's and libuv's
 * helper threads apart); call the result with a number of units for the switches per unit since
 * (NaN when /proc could not be read). On this VM each switch costs far more than a system call
 * (bench/HISTORY.md, "What a wake-up costs here"), so their count per delivery is the structure under the
 * CPU figure at a paced rate, and it moves much less from run to run than the CPU does.
 */
export function switchMeter(pid: number): (units: number) => Switches {
  const read = (): Switches => {
    try {
      const status = readFileSync(`/proc/${pid}/task/${pid}/status`, 'utf8');
      const field = (name: string): number => Number(new RegExp(`^${name}:\\s*(\\d+)`, 'm').exec(status)?.[1] ?? NaN);
      return { sleeps: field('voluntary_ctxt_switches'), preemptions: field('nonvoluntary_ctxt_switches') };
    } catch {
      return { sleeps: NaN, preemptions: NaN };
    }
  };
  const before = read();
  return (units) => {
    const after = read();
    return { sleeps: (after.sleeps - before.sleeps) / units, preemptions: (after.preemptions - before.preemptions) / units };
  };
}
