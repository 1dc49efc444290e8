import crypto, { createHmac } from 'node:crypto';
import { SIGNATURE_HEADER, sign, verify } from '@svc/webhook-signature';

const SECRET = 'whsec_test_0123456789abcdef0123456789abcdef';
const BODY = '{"event":"GUIA_CREADA","timestamp":"2026-11-22T10:00:00.000Z","webhookId":"6f1c7a3e-1d2b-4c5d-8e9f-0a1b2c3d4e5f","data":{"numeroGuia":"GT-1","estado":"CREADA"}}';

describe('sign', () => {
  it('is sha256=<hex HMAC-SHA256 of the raw body keyed with the secret>', () => {
    const expected = createHmac('sha256', SECRET).update(BODY).digest('hex');
    expect(sign(BODY, SECRET)).toBe(`sha256=${expected}`);
    expect(sign(BODY, SECRET)).toMatch(/^sha256=[0-9a-f]{64}$/);
  });

  it('signs a string as its UTF-8 bytes, so a Buffer and a string of the same text agree', () => {
    const text = '{"motivo":"Dirección ñ € 😀"}';
    expect(sign(text, SECRET)).toBe(sign(Buffer.from(text, 'utf8'), SECRET));
  });

  it('matches a known vector (RFC 4231 test case 2)', () => {
    expect(sign('what do ya want for nothing?', 'Jefe')).toBe(
      'sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843',
    );
  });

  it('names the header as the contract does', () => {
    expect(SIGNATURE_HEADER).toBe('X-SVC-Signature');
  });
});

describe('verify', () => {
  const header = sign(BODY, SECRET);

  it('accepts the signature over the same bytes, as a string or a Buffer', () => {
    expect(verify(BODY, header, SECRET)).toBe(true);
    expect(verify(Buffer.from(BODY, 'utf8'), header, SECRET)).toBe(true);
  });

  it('accepts the header as an array (first value) and upper-case hex', () => {
    expect(verify(BODY, [header], SECRET)).toBe(true);
    expect(verify(BODY, 'sha256=' + header.slice(7).toUpperCase(), SECRET)).toBe(true);
  });

  it('rejects another secret', () => {
    expect(verify(BODY, header, SECRET + '1')).toBe(false);
    expect(verify(BODY, header, 'another')).toBe(false);
  });

  it('rejects any single changed byte of the body', () => {
    const raw = Buffer.from(BODY, 'utf8');
    for (let i = 0; i < raw.length; i++) {
      const tampered = Buffer.from(raw);
      tampered[i] = tampered[i]! ^ 0x20;
      expect(verify(tampered, header, SECRET)).toBe(false);
    }
  });

  it('rejects the same JSON re-serialised (spacing differs, so the bytes differ)', () => {
    const reparsed = JSON.stringify(JSON.parse(BODY), null, 2);
    expect(verify(reparsed, header, SECRET)).toBe(false);
  });

  it('rejects an appended or truncated body', () => {
    expect(verify(BODY + ' ', header, SECRET)).toBe(false);
    expect(verify(BODY.slice(0, -1), header, SECRET)).toBe(false);
    expect(verify('', header, SECRET)).toBe(false);
  });

  it('rejects a changed hex digit anywhere in the signature', () => {
    const hex = header.slice(7);
    for (const i of [0, 1, 31, 32, 62, 63]) {
      const digit = hex[i] === '0' ? '1' : '0';
      expect(verify(BODY, `sha256=${hex.slice(0, i)}${digit}${hex.slice(i + 1)}`, SECRET)).toBe(false);
    }
  });

  const hex = sign(BODY, SECRET).slice(7);
  it.each<[string, string | string[] | undefined]>([
    ['missing', undefined],
    ['empty', ''],
    ['empty array', []],
    ['prefix only', 'sha256='],
    ['no prefix', hex],
    ['another algorithm', `sha1=${hex}`],
    ['upper-case prefix', `SHA256=${hex}`],
    ['space after prefix', `sha256= ${hex}`],
    ['leading space', ` sha256=${hex}`],
    ['trailing junk after a valid signature', `sha256=${hex}zz`],
    ['trailing hex after a valid signature', `sha256=${hex}00`],
    ['truncated', `sha256=${hex.slice(0, 62)}`],
    ['odd length', `sha256=${hex.slice(0, 63)}`],
    ['non-hex characters', `sha256=${'g'.repeat(64)}`],
    ['base64 instead of hex', `sha256=${Buffer.from(hex, 'hex').toString('base64')}`],
    ['two signatures joined', `sha256=${hex},sha256=${hex}`],
  ])('rejects a malformed header: %s', (_what, value) => {
    expect(verify(BODY, value, SECRET)).toBe(false);
  });

  it('refuses everything with an empty secret, even a signature made with the empty key', () => {
    expect(verify(BODY, sign(BODY, ''), '')).toBe(false);
  });

  it('compares through crypto.timingSafeEqual, for right and wrong signatures alike', () => {
    const spy = jest.spyOn(crypto, 'timingSafeEqual');
    try {
      expect(verify(BODY, header, SECRET)).toBe(true);
      const wrongFirst = `sha256=${hex[0] === 'a' ? 'b' : 'a'}${hex.slice(1)}`;
      const wrongLast = `sha256=${hex.slice(0, 63)}${hex[63] === 'a' ? 'b' : 'a'}`;
      expect(verify(BODY, wrongFirst, SECRET)).toBe(false);
      expect(verify(BODY, wrongLast, SECRET)).toBe(false);
      // Every well-formed header reaches the constant-time comparison of the full 32 bytes.
      expect(spy).toHaveBeenCalledTimes(3);
      for (const [a, b] of spy.mock.calls) {
        expect((a as Buffer).length).toBe(32);
        expect((b as Buffer).length).toBe(32);
      }
    } finally {
      spy.mockRestore();
    }
  });
});
