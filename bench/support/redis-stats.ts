// What the dispatcher bench reads from Redis around a phase: the server's command counters, and
// the times BullMQ keeps on each job.
//
// What the counters include (Redis 7.0.15 here; checked with redis-cli, an EVAL whose script calls
// `redis.call('setrange', ...)` 1,000 times): cmdstat_setrange went up by 1,000 and cmdstat_eval by
// 1, and total_commands_processed by 1,002 (the EVAL, its 1,000 calls and the INFO that read it).
// So both `INFO stats` total_commands_processed and `INFO commandstats` count the commands a script
// runs, besides the EVAL/EVALSHA itself: "commands" below are every command executed, inside
// BullMQ's Lua scripts included, and the per-command calls show a script's inner HSETs, ZADDs...
// under their own names. Every client of this Redis counts, not only the processes benched.
import type { Redis } from 'ioredis';

/** The commands that run a script (BullMQ runs each of its operations as one EVALSHA). */
export const SCRIPT_COMMANDS = ['eval', 'evalsha', 'eval_ro', 'evalsha_ro', 'fcall', 'fcall_ro'] as const;

export interface RedisCommandStats {
  /** `total_commands_processed` (INFO stats). */
  total: number;
  /** Calls per command (INFO commandstats: `cmdstat_<name>:calls=N,...`; subcommands as `client|setname`). */
  calls: Map<string, number>;
}

/** Redis's command counters now, both sections read by one INFO (one snapshot). */
export async function redisCommandStats(redis: Redis): Promise<RedisCommandStats> {
  const info = String(await redis.call('info', 'stats', 'commandstats'));
  const calls = new Map<string, number>();
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) calls.set(m[1]!, Number(m[2]));
  return { total: Number(/^total_commands_processed:(\d+)/m.exec(info)?.[1] ?? NaN), calls };
}

export interface RedisCommandDelta extends RedisCommandStats {
  /** Calls of the script commands (SCRIPT_COMMANDS), summed. */
  scripts: number;
}

/** The commands Redis ran between two readings (all clients). */
export function commandDelta(before: RedisCommandStats, after: RedisCommandStats): RedisCommandDelta {
  const calls = new Map<string, number>();
  for (const [name, n] of after.calls) {
    const d = n - (before.calls.get(name) ?? 0);
    if (d > 0) calls.set(name, d);
  }
  const scripts = SCRIPT_COMMANDS.reduce((sum, name) => sum + (calls.get(name) ?? 0), 0);
  return { total: after.total - before.total, calls, scripts };
}

/** The `n` commands called most (of those `only` names, when given), per unit of work: `evalsha 2.00, bzpopmin 1.10, ...`. */
export function topCommands(calls: Map<string, number>, units: number, n = 5, only?: Set<string>): string {
  return [...calls]
    .filter(([name]) => !only || only.has(name))
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([name, c]) => `${name} ${(c / units).toFixed(2)}`)
    .join(', ');
}

/**
 * Which of `names` carry the `noscript` flag (COMMAND INFO): commands a script cannot run (EVALSHA,
 * BZPOPMIN, MULTI, INFO...), so each call of one is a client's round trip, never a script's inner call.
 */
export async function noscriptCommands(redis: Redis, names: Iterable<string>): Promise<Set<string>> {
  const list = [...names];
  const out = new Set<string>();
  if (list.length === 0) return out;
  const info = (await redis.call('command', 'info', ...list)) as Array<[string, number, string[]] | null>;
  info.forEach((entry, i) => {
    if (entry && entry[2].includes('noscript')) out.add(list[i]!);
  });
  return out;
}

/**
 * The times BullMQ keeps on a job, in ms since the epoch, each from the Date.now() of the process
 * that set it: `timestamp` the producer's when it added the job (before the add reached Redis),
 * `processedOn` the worker's when it moved the job to active (its last attempt), `finishedOn`
 * the worker's when it moved the job to completed or failed. Absent: not yet (or not a number).
 */
export interface JobTimes {
  timestamp: number;
  processedOn?: number;
  finishedOn?: number;
}

/**
 * The times of the jobs `ids` of `queue` (hash `${prefix}:${queue}:${id}`), read in pipelines of
 * 1,000 HMGETs; a job no longer in Redis (removed on completion) is absent from the map.
 */
export async function jobTimes(redis: Redis, prefix: string, queue: string, ids: readonly string[]): Promise<Map<string, JobTimes>> {
  const out = new Map<string, JobTimes>();
  const num = (v: string | null): number | undefined => (v === null || v === '' || Number.isNaN(Number(v)) ? undefined : Number(v));
  for (let i = 0; i < ids.length; i += 1000) {
    const chunk = ids.slice(i, i + 1000);
    const pipeline = redis.pipeline();
    for (const id of chunk) pipeline.hmget(`${prefix}:${queue}:${id}`, 'timestamp', 'processedOn', 'finishedOn');
    const results = (await pipeline.exec()) ?? [];
    results.forEach(([err, value], j) => {
      if (err) throw err;
      const [timestamp, processedOn, finishedOn] = (value as Array<string | null>).map(num);
      if (timestamp === undefined) return;
      out.set(chunk[j]!, {
        timestamp,
        ...(processedOn === undefined ? {} : { processedOn }),
        ...(finishedOn === undefined ? {} : { finishedOn }),
      });
    });
  }
  return out;
}
