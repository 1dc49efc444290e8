import { checkWebhookUrl, MAX_WEBHOOK_URL_LENGTH } from '@svc/webhook-sender';

/**
 * The creation/update-time URL rules, one row per case: only absolute https:// URLs, no user info,
 * not localhost, no IPv4 or IPv6 literal in a guarded range however spelled.
 */

/** The reason a URL is refused; fails the test when it is accepted. */
function rejection(url: string): string {
  const check = checkWebhookUrl(url);
  if (check.ok) throw new Error(`accepted ${url} as ${check.url}`);
  return check.reason;
}

describe('checkWebhookUrl rejects', () => {
  const cases: Array<[reason: string, url: string, message: RegExp]> = [
    // scheme and shape
    ['plain http', 'http://example.com/hook', /https:\/\//],
    ['ftp', 'ftp://example.com/hook', /https:\/\//],
    ['relative', '/hook', /https:\/\//],
    ['scheme-relative', '//example.com/hook', /https:\/\//],
    ['https without slashes', 'https:example.com/hook', /https:\/\//],
    ['https with one slash', 'https:/example.com/hook', /https:\/\//],
    ['empty', '', /absolute https:\/\//],
    ['blank', '   ', /absolute https:\/\//],
    ['not a URL', 'https://exa mple.com/', /not a valid URL/],
    ['empty host', 'https:///hook', /not a valid URL|host/],
    ['too long', `https://example.com/${'a'.repeat(MAX_WEBHOOK_URL_LENGTH)}`, /at most 2048 characters/],
    // user info
    ['user and password', 'https://user:pass@example.com/hook', /user information/],
    ['user only', 'https://user@example.com/hook', /user information/],
    ['empty user info', 'https://@example.com/hook', /user information/],
    ['password only', 'https://:secret@example.com/hook', /user information/],
    // localhost
    ['localhost', 'https://localhost/hook', /localhost/],
    ['LOCALHOST with port', 'https://LOCALHOST:8443/hook', /localhost/],
    ['localhost with trailing dot', 'https://localhost./hook', /localhost/],
    ['sub.localhost', 'https://api.localhost/hook', /localhost/],
    ['Sub.LocalHost. with trailing dot', 'https://a.b.LocalHost./hook', /localhost/],
    // IPv4 loopback, every spelling the WHATWG parser accepts
    ['127.0.0.1', 'https://127.0.0.1/hook', /127\.0\.0\.1 \(loopback/],
    ['127.1.2.3', 'https://127.1.2.3:8443/hook', /loopback/],
    ['decimal integer', 'https://2130706433/', /127\.0\.0\.1 \(loopback/],
    ['hex with short form', 'https://0x7f.1/', /127\.0\.0\.1 \(loopback/],
    ['octal integer', 'https://017700000001/', /127\.0\.0\.1 \(loopback/],
    ['hex integer', 'https://0x7f000001/', /127\.0\.0\.1 \(loopback/],
    ['octal dotted', 'https://0177.0.0.01/', /127\.0\.0\.1 \(loopback/],
    ['two-part', 'https://127.1/', /127\.0\.0\.1 \(loopback/],
    ['three-part', 'https://127.0.1/', /127\.0\.0\.1 \(loopback/],
    ['trailing dot', 'https://127.0.0.1./', /127\.0\.0\.1 \(loopback/],
    ['upper-case hex', 'https://0X7F.0X0.0X0.0X1/', /127\.0\.0\.1 \(loopback/],
    ['percent-encoded', 'https://%31%32%37.0.0.1/', /127\.0\.0\.1 \(loopback/],
    ['full-width digits', 'https://\uff11\uff12\uff17.0.0.1/', /127\.0\.0\.1 \(loopback/],
    // other guarded IPv4 ranges
    ['10/8', 'https://10.0.0.1/hook', /10\.0\.0\.1 \(private/],
    ['10/8 as integer', 'https://167772161/', /10\.0\.0\.1 \(private/],
    ['172.16/12 low', 'https://172.16.0.1/', /private/],
    ['172.16/12 high', 'https://172.31.255.254/', /private/],
    ['192.168/16', 'https://192.168.1.1/', /private/],
    ['192.168/16 in hex', 'https://0xc0.0xa8.1.1/', /192\.168\.1\.1 \(private/],
    ['link-local (cloud metadata)', 'https://169.254.169.254/latest/meta-data/', /link-local/],
    ['carrier-grade NAT', 'https://100.64.0.1/', /carrier-grade NAT/],
    ['carrier-grade NAT top', 'https://100.127.255.255/', /carrier-grade NAT/],
    ['0.0.0.0', 'https://0.0.0.0/', /unspecified/],
    ['0 as integer', 'https://0/', /0\.0\.0\.0 \(unspecified/],
    ['multicast', 'https://224.0.0.1/', /multicast/],
    ['broadcast', 'https://255.255.255.255/', /broadcast/],
    ['class E reserved', 'https://240.0.0.1/', /reserved/],
    ['documentation TEST-NET-1', 'https://192.0.2.10/', /documentation/],
    ['documentation TEST-NET-3', 'https://203.0.113.5/', /documentation/],
    ['benchmarking', 'https://198.18.0.1/', /benchmarking/],
    // IPv6 literals
    ['::1', 'https://[::1]/hook', /loopback/],
    ['::1 spelled out', 'https://[0:0:0:0:0:0:0:1]:8443/hook', /loopback/],
    ['::', 'https://[::]/', /unspecified/],
    ['IPv4-mapped loopback', 'https://[::ffff:127.0.0.1]/', /IPv4-mapped loopback/],
    ['IPv4-mapped loopback in hex', 'https://[::ffff:7f00:1]/', /IPv4-mapped loopback/],
    ['IPv4-mapped private', 'https://[::ffff:10.1.2.3]/', /IPv4-mapped private/],
    ['IPv4-mapped link-local', 'https://[::ffff:169.254.169.254]/', /IPv4-mapped link-local/],
    ['IPv4-compatible loopback', 'https://[::127.0.0.1]/', /IPv4-compatible/],
    ['unique-local fc00::/7 (fd)', 'https://[fd12:3456:789a::1]/', /unique-local/],
    ['unique-local fc00::/7 (fc)', 'https://[fc00::1]/', /unique-local/],
    ['link-local fe80::/10', 'https://[fe80::1]/', /link-local/],
    ['link-local fe80::/10 upper end', 'https://[febf::1]/', /link-local/],
    ['site-local', 'https://[fec0::1]/', /site-local/],
    ['multicast', 'https://[ff02::1]/', /multicast/],
    ['documentation', 'https://[2001:db8::1]/', /documentation/],
    ['NAT64 of loopback', 'https://[64:ff9b::7f00:1]/', /NAT64/],
    ['6to4 of loopback', 'https://[2002:7f00:1::1]/', /6to4 loopback/],
    ['6to4 of private', 'https://[2002:c0a8:101::1]/', /6to4 private/],
  ];

  it.each(cases)('%s: %s', (_reason, url, message) => {
    expect(rejection(url)).toMatch(message);
  });
});

describe('checkWebhookUrl accepts', () => {
  const cases: Array<[url: string, normalised: string]> = [
    ['https://example.com/hook', 'https://example.com/hook'],
    ['HTTPS://Example.COM/Hook?a=1', 'https://example.com/Hook?a=1'],
    ['https://receiver.test:8443/hook', 'https://receiver.test:8443/hook'],
    ['https://api.example.com', 'https://api.example.com/'],
    ['https://example.com:443/x', 'https://example.com/x'],
    ['https://8.8.8.8/hook', 'https://8.8.8.8/hook'],
    ['https://134744072/', 'https://8.8.8.8/'],
    ['https://1.1.1.1:4443/', 'https://1.1.1.1:4443/'],
    ['https://172.32.0.1/', 'https://172.32.0.1/'],
    ['https://100.128.0.1/', 'https://100.128.0.1/'],
    ['https://[2606:4700:4700::1111]/hook', 'https://[2606:4700:4700::1111]/hook'],
    ['https://[::ffff:8.8.8.8]/', 'https://[::ffff:808:808]/'],
    ['https://notlocalhost.com/', 'https://notlocalhost.com/'],
    ['https://localhost.example.com/', 'https://localhost.example.com/'],
    ['  https://example.com/padded  ', 'https://example.com/padded'],
  ];

  it.each(cases)('%s', (url, normalised) => {
    expect(checkWebhookUrl(url)).toEqual({ ok: true, url: normalised });
  });

  it('accepts a URL of exactly the maximum length', () => {
    const base = 'https://example.com/';
    const url = base + 'a'.repeat(MAX_WEBHOOK_URL_LENGTH - base.length);
    expect(url).toHaveLength(MAX_WEBHOOK_URL_LENGTH);
    expect(checkWebhookUrl(url)).toEqual({ ok: true, url });
  });
});
