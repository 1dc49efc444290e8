import { guardedRange, parseIp } from './address.guard';
import { normaliseHostName } from './host-map.parser';

export const MAX_WEBHOOK_URL_LENGTH = 2048;

/** A URL the rules accept, in its normalised form, or the reason it is refused. */
export type UrlCheck = { ok: true; url: string } | { ok: false; reason: string };

const invalid = (reason: string): UrlCheck => ({ ok: false, reason });

/**
 * The creation- and update-time URL rules: an absolute https:// URL, no user information, not
 * localhost or *.localhost, no IPv4 or IPv6 literal in a guarded range however spelled. Accepts the URL as the
 * WHATWG parser normalises it (the form that is stored and later sent to), or says why not; the
 * caller decides what a refusal means (the gateway answers 400 INVALID_URL). Host names are not
 * resolved here: what a name points to can change, so the sender guards the resolved address
 * again at every connection.
 */
export function checkWebhookUrl(url: string): UrlCheck {
  if (typeof url !== 'string' || url.trim() === '') return invalid('url must be an absolute https:// URL');
  if (url.length > MAX_WEBHOOK_URL_LENGTH) {
    return invalid(`url must be at most ${MAX_WEBHOOK_URL_LENGTH} characters long`);
  }
  const text = url.trim();
  // The WHATWG parser would also take `https:host` or `https:/host`; the contract asks for https://.
  if (!/^https:\/\//i.test(text)) return invalid('url must be an absolute URL that starts with https://');

  let parsed: URL;
  try {
    parsed = new URL(text);
  } catch {
    return invalid('url is not a valid URL');
  }
  if (parsed.protocol !== 'https:') return invalid('url must use https://');

  // `https://@host/` parses to an empty user name, so look at the authority as written as well.
  const authority = text.slice('https://'.length).split(/[/?#\\]/, 1)[0] ?? '';
  if (parsed.username !== '' || parsed.password !== '' || authority.includes('@')) {
    return invalid('url must not contain user information (user:password@)');
  }

  const host = parsed.hostname;
  // `https:///x` parses as https://x/; an empty authority as written has no host.
  if (host === '' || authority === '') return invalid('url must name a host');
  const name = normaliseHostName(host);
  if (name === 'localhost' || name.endsWith('.localhost')) return invalid('url must not point to localhost');

  // By now every IPv4 spelling (2130706433, 0x7f.1, 017700000001, 127.1) reads as dotted decimal,
  // and IPv6 literals are bracketed and compressed.
  const address = parseIp(host);
  if (address !== undefined) {
    const range = guardedRange(address);
    if (range !== null) {
      return invalid(`url must not point to ${address.toString()} (${range} range); use a public address or host name`);
    }
  } else if (host.startsWith('[') || /^[\d.]+$/.test(name)) {
    // Defensive: an IP-looking host the parser accepted but ipaddr does not understand.
    return invalid('url has an IP address that cannot be checked');
  }
  return { ok: true, url: parsed.href };
}
