import { AppError } from '@svc/schema';
import { guardedRange, parseIp } from './address.guard';
import { normaliseHostName } from './host-map.parser';

export const MAX_WEBHOOK_URL_LENGTH = 2048;

function invalid(message: string): AppError {
  return new AppError('INVALID_URL', message);
}

/**
 * The creation- and update-time URL rules (operations.md, "Deliveries"). Returns the URL as the
 * WHATWG parser normalises it (the form that is stored and later sent to), or throws
 * AppError('INVALID_URL'). Host names are not resolved here: what a name points to can change, so
 * the sender guards the resolved address again at every connection.
 */
export function validateWebhookUrl(url: string): string {
  if (typeof url !== 'string' || url.trim() === '') throw invalid('url must be an absolute https:// URL');
  if (url.length > MAX_WEBHOOK_URL_LENGTH) {
    throw invalid(`url must be at most ${MAX_WEBHOOK_URL_LENGTH} characters long`);
  }
  const text = url.trim();
  // The WHATWG parser would also take `https:host` or `https:/host`; the contract asks for https://.
  if (!/^https:\/\//i.test(text)) throw invalid('url must be an absolute URL that starts with https://');

  let parsed: URL;
  try {
    parsed = new URL(text);
  } catch {
    throw invalid('url is not a valid URL');
  }
  if (parsed.protocol !== 'https:') throw invalid('url must use https://');

  // `https://@host/` parses to an empty user name, so look at the authority as written as well.
  const authority = text.slice('https://'.length).split(/[/?#\\]/, 1)[0] ?? '';
  if (parsed.username !== '' || parsed.password !== '' || authority.includes('@')) {
    throw invalid('url must not contain user information (user:password@)');
  }

  const host = parsed.hostname;
  // `https:///x` parses as https://x/; an empty authority as written has no host.
  if (host === '' || authority === '') throw invalid('url must name a host');
  const name = normaliseHostName(host);
  if (name === 'localhost' || name.endsWith('.localhost')) throw invalid('url must not point to localhost');

  // By now every IPv4 spelling (2130706433, 0x7f.1, 017700000001, 127.1) reads as dotted decimal,
  // and IPv6 literals are bracketed and compressed.
  const address = parseIp(host);
  if (address !== undefined) {
    const range = guardedRange(address);
    if (range !== null) {
      throw invalid(`url must not point to ${address.toString()} (${range} range); use a public address or host name`);
    }
  } else if (host.startsWith('[') || /^[\d.]+$/.test(name)) {
    // Defensive: an IP-looking host the parser accepted but ipaddr does not understand.
    throw invalid('url has an IP address that cannot be checked');
  }
  return parsed.href;
}
