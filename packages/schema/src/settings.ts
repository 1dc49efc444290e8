import { existsSync } from 'node:fs';
import { resolve } from 'node:path';

// Node reads NODE_EXTRA_CA_CERTS once, as the process starts; a value that `.env` supplies later
// is not in Node's trust store, so the webhook sender has to add it itself.
const extraCaCertsAtStart = process.env.NODE_EXTRA_CA_CERTS;

/**
 * NODE_EXTRA_CA_CERTS when it was set after the process started (by `loadDotEnv`), so Node did not
 * apply it; undefined when Node already trusts it or it is unset.
 */
export function lateExtraCaCerts(env: Record<string, string | undefined> = process.env): string | undefined {
  const value = env.NODE_EXTRA_CA_CERTS;
  return value === undefined || value === '' || value === extraCaCertsAtStart ? undefined : value;
}

/** Reads `.env` at the workspace root (or the working directory) when present; the environment wins. */
export function loadDotEnv(): void {
  for (const candidate of [resolve(process.cwd(), '.env'), resolve(__dirname, '../../../.env')]) {
    if (existsSync(candidate)) {
      // Node's own loader: it never overrides a variable that is already set.
      process.loadEnvFile(candidate);
      return;
    }
  }
}

type Env = Record<string, string | undefined>;

/** Collects every bad setting before failing, so one start reports them all. */
export class SettingsReader {
  private readonly problems: string[] = [];
  constructor(private readonly env: Env) {}

  string(name: string, fallback: string): string {
    const v = this.env[name];
    return v === undefined || v === '' ? fallback : v;
  }

  optional(name: string): string | undefined {
    const v = this.env[name];
    return v === undefined || v === '' ? undefined : v;
  }

  int(name: string, fallback: number, min: number, max: number): number {
    const raw = this.env[name];
    if (raw === undefined || raw === '') return fallback;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min || n > max) {
      this.problems.push(`${name}=${JSON.stringify(raw)} must be an integer from ${min} to ${max}`);
      return fallback;
    }
    return n;
  }

  url(name: string, fallback: string, protocols: string[]): string {
    const v = this.string(name, fallback);
    try {
      const u = new URL(v);
      if (!protocols.includes(u.protocol)) throw new Error('protocol');
    } catch {
      this.problems.push(`${name} must be a URL starting with ${protocols.map((p) => `${p}//`).join(' or ')}`);
    }
    return v;
  }

  check(name: string, ok: boolean, why: string): void {
    if (!ok) this.problems.push(`${name}: ${why}`);
  }

  /** Throws one error listing every problem found. */
  done(service: string): void {
    if (this.problems.length) {
      throw new Error(`${service}: invalid settings:\n  - ${this.problems.join('\n  - ')}`);
    }
  }
}
