import crypto, { randomBytes, randomUUID } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { sign, signStandard, standardSecret, standardSignatureHeader, verifyDelivery, type VerifyDeliveryInput } from '@svc/webhook-signature';

/** verifyDelivery: both schemes, several secrets, the tolerance on the signed time, the reasons. */

const newSecret = (): string => `whsec_${randomBytes(32).toString('base64')}`;
const NOW = Date.parse('2026-11-22T10:00:00.000Z');
const seconds = (ms: number): number => Math.floor(ms / 1000);

function body(at: number, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({ event: 'GUIA_CREADA', timestamp: new Date(at).toISOString(), webhookId: randomUUID(), data: { numeroGuia: 'GT-1', estado: 'CREADA' }, ...extra });
}

/** The headers the dispatcher sends (delivery.attempt.ts), for a body stamped `at`. */
function delivery(secrets: string[], at = NOW, eventId = randomUUID()): { rawBody: string; headers: Record<string, string> } {
  const rawBody = body(at);
  const [current, previous] = secrets;
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'x-svc-signature': sign(rawBody, current!),
    'x-svc-event': 'GUIA_CREADA',
    'webhook-id': eventId,
    'webhook-timestamp': String(seconds(at)),
    'webhook-signature': standardSignatureHeader(eventId, seconds(at), rawBody, secrets),
  };
  if (previous !== undefined) headers['x-svc-signature-anterior'] = sign(rawBody, previous);
  return { rawBody, headers };
}

const only = (headers: Record<string, string>, names: string[]): Record<string, string> =>
  Object.fromEntries(Object.entries(headers).filter(([name]) => names.includes(name) || !/signature|^webhook-/.test(name)));
const svcOnly = (h: Record<string, string>) => only(h, ['x-svc-signature', 'x-svc-signature-anterior']);
const standardOnly = (h: Record<string, string>) => only(h, ['webhook-id', 'webhook-timestamp', 'webhook-signature']);
const check = (input: Omit<VerifyDeliveryInput, 'now'>, now = NOW) => verifyDelivery({ now, ...input });

describe('verifyDelivery', () => {
  const secret = newSecret();

  it('accepts a delivery as the dispatcher signs it, returning the scheme, event and parsed payload', () => {
    const { rawBody, headers } = delivery([secret]);
    const result = check({ rawBody, headers, secrets: secret });
    expect(result).toEqual({ ok: true, scheme: 'svc', event: 'GUIA_CREADA', payload: JSON.parse(rawBody), signedAt: new Date(NOW), secretIndex: 0 });
    expect(check({ rawBody: Buffer.from(rawBody), headers, secrets: [secret] })).toMatchObject({ ok: true });
  });

  it('accepts either scheme alone', () => {
    const { rawBody, headers } = delivery([secret]);
    expect(check({ rawBody, headers: svcOnly(headers), secrets: secret })).toMatchObject({ ok: true, scheme: 'svc' });
    expect(check({ rawBody, headers: standardOnly(headers), secrets: secret })).toMatchObject({ ok: true, scheme: 'standard', event: 'GUIA_CREADA' });
  });

  it('takes node headers, any-case plain objects, arrays and Fetch Headers', () => {
    const { rawBody, headers } = delivery([secret]);
    const upper = Object.fromEntries(Object.entries(svcOnly(headers)).map(([k, v]) => [k.toUpperCase(), v]));
    expect(check({ rawBody, headers: upper, secrets: secret })).toMatchObject({ ok: true, scheme: 'svc' });
    expect(check({ rawBody, headers: { 'x-svc-signature': [headers['x-svc-signature']!] }, secrets: secret })).toMatchObject({ ok: true });
    expect(check({ rawBody, headers: new Headers(standardOnly(headers)), secrets: secret })).toMatchObject({ ok: true, scheme: 'standard' });
  });

  describe('secret rotation', () => {
    const current = newSecret();
    const previous = newSecret();
    const { rawBody, headers } = delivery([current, previous]);

    it('a receiver that still has only the previous secret verifies through X-SVC-Signature-Anterior or the second v1 entry', () => {
      expect(check({ rawBody, headers, secrets: previous })).toMatchObject({ ok: true, scheme: 'svc', secretIndex: 0 });
      const noAnterior = { ...headers };
      delete noAnterior['x-svc-signature-anterior'];
      expect(check({ rawBody, headers: svcOnly(noAnterior), secrets: previous })).toEqual({ ok: false, reason: 'invalid_signature' });
      expect(check({ rawBody, headers: standardOnly(headers), secrets: previous })).toMatchObject({ ok: true, scheme: 'standard' });
    });

    it('a receiver given both secrets verifies with either, and says which matched', () => {
      expect(check({ rawBody, headers, secrets: [current, previous] })).toMatchObject({ ok: true, secretIndex: 0 });
      expect(check({ rawBody, headers, secrets: [previous, current] })).toMatchObject({ ok: true, secretIndex: 0 });
      const after = delivery([current]);
      expect(check({ ...after, secrets: ['', previous, current] })).toMatchObject({ ok: true, secretIndex: 2 });
      expect(check({ ...after, secrets: [previous] })).toEqual({ ok: false, reason: 'invalid_signature' });
    });
  });

  describe('tolerance on the signed time (replays)', () => {
    const { rawBody, headers } = delivery([secret]);

    it.each([
      ['svc', svcOnly],
      ['standard', standardOnly],
    ] as const)('%s: accepts within 5 minutes either side, refuses beyond', (scheme, pick) => {
      const h = pick(headers);
      for (const offset of [0, 299_000, -299_000, 300_000, -300_000]) {
        expect(check({ rawBody, headers: h, secrets: secret }, NOW + offset)).toMatchObject({ ok: true, scheme });
      }
      for (const offset of [301_000, -301_000, 3_600_000]) {
        expect(check({ rawBody, headers: h, secrets: secret }, NOW + offset)).toEqual({ ok: false, reason: 'timestamp_out_of_tolerance' });
      }
      expect(check({ rawBody, headers: h, secrets: secret, toleranceSeconds: 3600 }, NOW + 3_600_000)).toMatchObject({ ok: true });
      expect(check({ rawBody, headers: h, secrets: secret, toleranceSeconds: 0 }, NOW + 1500)).toEqual({ ok: false, reason: 'timestamp_out_of_tolerance' });
    });

    it('uses the current time by default', () => {
      const fresh = delivery([secret], Date.now());
      expect(verifyDelivery({ ...fresh, secrets: secret })).toMatchObject({ ok: true });
      const stale = delivery([secret], Date.now() - 10 * 60_000);
      expect(verifyDelivery({ ...stale, secrets: secret })).toEqual({ ok: false, reason: 'timestamp_out_of_tolerance' });
    });

    it('a replay with a fresh unsigned header is still refused: only the signed time counts', () => {
      const old = delivery([secret], NOW - 3_600_000);
      const refreshed = { ...svcOnly(old.headers), 'x-svc-timestamp': new Date(NOW).toISOString() };
      expect(check({ rawBody: old.rawBody, headers: refreshed, secrets: secret })).toEqual({ ok: false, reason: 'timestamp_out_of_tolerance' });
      const restamped = { ...standardOnly(old.headers), 'webhook-timestamp': String(seconds(NOW)) };
      expect(check({ rawBody: old.rawBody, headers: restamped, secrets: secret })).toEqual({ ok: false, reason: 'invalid_signature' });
    });

    it('refuses a bad tolerance as a programming error', () => {
      expect(() => check({ rawBody, headers, secrets: secret, toleranceSeconds: -1 })).toThrow(TypeError);
      expect(() => check({ rawBody, headers, secrets: secret, toleranceSeconds: Number.NaN })).toThrow(TypeError);
    });
  });

  describe('refusals', () => {
    const { rawBody, headers } = delivery([secret]);

    it('no secret (an unset variable) refuses everything', () => {
      expect(check({ rawBody, headers, secrets: '' })).toEqual({ ok: false, reason: 'no_secret' });
      expect(check({ rawBody, headers, secrets: [] })).toEqual({ ok: false, reason: 'no_secret' });
      expect(check({ rawBody, headers, secrets: ['', ''] })).toEqual({ ok: false, reason: 'no_secret' });
    });

    it('no signature header', () => {
      expect(check({ rawBody, headers: { 'content-type': 'application/json' }, secrets: secret })).toEqual({ ok: false, reason: 'missing_signature' });
    });

    it.each<[string, (b: string) => string, (h: Record<string, string>) => Record<string, string>]>([
      ['a changed byte of the body', (b) => b.replace('GT-1', 'GT-2'), (h) => h],
      ['the same JSON re-serialised', (b) => JSON.stringify(JSON.parse(b), null, 1), (h) => h],
      ['another webhook-id', (b) => b, (h) => ({ ...standardOnly(h), 'webhook-id': randomUUID() })],
      ['malformed signatures', (b) => b, () => ({ 'x-svc-signature': 'sha256=zz', 'webhook-id': 'a', 'webhook-timestamp': String(seconds(NOW)), 'webhook-signature': 'v1,!!' })],
      ['a v2 entry', (b) => b, (h) => ({ ...standardOnly(h), 'webhook-signature': h['webhook-signature']!.replace('v1,', 'v2,') })],
      ['a non-numeric webhook-timestamp', (b) => b, (h) => ({ ...standardOnly(h), 'webhook-timestamp': `${h['webhook-timestamp']!}.0` })],
    ])('invalid_signature: %s', (_what, changeBody, changeHeaders) => {
      expect(check({ rawBody: changeBody(rawBody), headers: changeHeaders(headers), secrets: secret })).toEqual({ ok: false, reason: 'invalid_signature' });
    });

    it('invalid_signature: another secret', () => {
      expect(check({ rawBody, headers, secrets: [newSecret(), 'plain'] })).toEqual({ ok: false, reason: 'invalid_signature' });
    });

    it('invalid_payload: a correctly signed body that is not a delivery', () => {
      for (const raw of ['not json', '[]', '{"event":"PING"}', '{"event":"PING","timestamp":"yesterday"}']) {
        expect(check({ rawBody: raw, headers: { 'x-svc-signature': sign(raw, secret) }, secrets: secret })).toEqual({ ok: false, reason: 'invalid_payload' });
      }
      const raw = 'not json';
      const h = { 'webhook-id': 'id', 'webhook-timestamp': String(seconds(NOW)), 'webhook-signature': signStandard('id', seconds(NOW), raw, secret) };
      expect(check({ rawBody: raw, headers: h, secrets: secret })).toEqual({ ok: false, reason: 'invalid_payload' });
    });

    it('compares in constant time: every candidate goes through crypto.timingSafeEqual', () => {
      const spy = jest.spyOn(crypto, 'timingSafeEqual');
      try {
        expect(check({ rawBody, headers: standardOnly(headers), secrets: [newSecret(), secret] })).toMatchObject({ ok: true });
        expect(spy).toHaveBeenCalledTimes(2);
        spy.mockClear();
        expect(check({ rawBody, headers: svcOnly(headers), secrets: [newSecret(), secret] })).toMatchObject({ ok: true });
        expect(spy).toHaveBeenCalledTimes(2);
      } finally {
        spy.mockRestore();
      }
    });
  });

  describe('against the standardwebhooks package (1.1.x)', () => {
    it('accepts what the package signs, and the package accepts what verifyDelivery accepts', () => {
      for (let i = 0; i < 10; i++) {
        const s = newSecret();
        const id = randomUUID();
        const at = Date.now();
        const rawBody = body(at);
        const headers = { 'webhook-id': id, 'webhook-timestamp': String(seconds(at)), 'webhook-signature': new Webhook(s).sign(id, new Date(at), rawBody) };
        expect(verifyDelivery({ rawBody, headers, secrets: s })).toMatchObject({ ok: true, scheme: 'standard', payload: JSON.parse(rawBody) });
        expect(new Webhook(s).verify(rawBody, headers)).toEqual(JSON.parse(rawBody));
      }
    });

    it('older URL-safe whsec_ secrets are keyed as the package keys their standardSecret form', () => {
      const bytes = Buffer.from('fbff'.repeat(16), 'hex');
      const old = `whsec_${bytes.toString('base64url')}`;
      const id = randomUUID();
      const at = Date.now();
      const rawBody = body(at);
      const headers = { 'webhook-id': id, 'webhook-timestamp': String(seconds(at)), 'webhook-signature': new Webhook(standardSecret(old)).sign(id, new Date(at), rawBody) };
      expect(verifyDelivery({ rawBody, headers, secrets: old })).toMatchObject({ ok: true, scheme: 'standard' });
    });
  });
});
