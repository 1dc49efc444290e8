import { CliError } from './api.client.js';

/** Hosts plain HTTP may be forwarded to: this machine only. */
const LOCAL_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

/**
 * The URL `listen` POSTs each event to, from this machine: plain HTTP only to localhost or
 * 127.0.0.1 (a receiver under development), HTTPS anywhere. The platform never sends there itself.
 */
export function forwardTarget(raw: string): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new CliError(`--forward-to ${raw} is not a URL: give one such as http://localhost:4000/hook`);
  }
  if (url.protocol === 'https:') return url;
  if (url.protocol === 'http:' && LOCAL_HOSTS.has(url.hostname)) return url;
  if (url.protocol === 'http:') throw new CliError(`--forward-to ${raw}: plain http is allowed to localhost or 127.0.0.1 only; use https:// for another host`);
  throw new CliError(`--forward-to ${raw}: only http://localhost, http://127.0.0.1 or https:// URLs`);
}
