import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** What global-setup.ts started, for the tests (a file: the workers are other processes). */
export interface StackInfo {
  /** `http://localhost:<PORT>`: the gateway, its API and the portal. */
  baseUrl: string;
  /** `http://127.0.0.1:<ADMIN_PORT>`: the operator's routes, `/internal/v1` (404 on `baseUrl`). */
  adminUrl: string;
  adminToken: string;
  database: string;
  databaseUrl: string;
  redisPrefix: string;
  /** The process group of `pnpm start`. */
  pid: number;
  linkTtlSeconds: number;
}

export const STATE_FILE = join(__dirname, 'results', '.stack.json');

export function stackInfo(): StackInfo {
  return JSON.parse(readFileSync(STATE_FILE, 'utf8')) as StackInfo;
}
