import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { signStandard, standardKey, standardSecret, standardSignatureHeader } from '@svc/webhook-signature';

/** Checked against the `standardwebhooks` npm package itself, never a copy of its algorithm. */

const BODY = '{"event":"GUIA_CREADA","timestamp":"2026-11-22T10:00:00.000Z","webhookId":"6f1c7a3e-1d2b-4c5d-8e9f-0a1b2c3d4e5f","data":{"numeroGuia":"GT-1","estado":"CREADA"}}';
const ID = '0b6f2c1e-4a7d-4f0e-9c43-5d7b1e2a9f10';

function headers(seconds: number, signature: string): Record<string, string> {
  return { 'webhook-id': ID, 'webhook-timestamp': String(seconds), 'webhook-signature': signature };
}
const nowSeconds = (): number => Math.floor(Date.now() / 1000);

describe('Standard Webhooks signatures', () => {
  it('are exactly what the package computes for a whsec_ secret (its sign), and it verifies them', () => {
    for (let i = 0; i < 20; i++) {
      const secret = `whsec_${randomBytes(32).toString('base64')}`;
      const seconds = nowSeconds();
      const ours = signStandard(ID, seconds, BODY, secret);
      expect(ours).toBe(new Webhook(secret).sign(ID, new Date(seconds * 1000), BODY));
      expect(new Webhook(secret).verify(BODY, headers(seconds, ours))).toEqual(JSON.parse(BODY));
      expect(standardKey(secret)).toEqual(Buffer.from(secret.slice(6), 'base64'));
      expect(standardSecret(secret)).toBe(secret);
    }
  });

  it('stay right for each secret when more secrets sign than the derived keys kept (1000)', () => {
    const secrets = Array.from({ length: 1100 }, () => `whsec_${randomBytes(32).toString('base64')}`);
    const seconds = nowSeconds();
    // Twice over: the second round finds the first keys evicted and the last ones kept.
    for (const round of [1, 2]) {
      for (const secret of secrets) {
        const signature = signStandard(ID, seconds, BODY, secret);
        expect({ round, same: signature === new Webhook(secret).sign(ID, new Date(seconds * 1000), BODY) }).toEqual({ round, same: true });
      }
    }
  });

  it('sign a Buffer and a string of the same text alike (multi-byte UTF-8 included)', () => {
    const secret = `whsec_${randomBytes(32).toString('base64')}`;
    const text = '{"motivo":"Dirección ñ € 😀"}';
    expect(signStandard(ID, 1, Buffer.from(text, 'utf8'), secret)).toBe(signStandard(ID, 1, text, secret));
    expect(new Webhook(secret).verify(Buffer.from(text, 'utf8'), headers(nowSeconds(), signStandard(ID, nowSeconds(), text, secret)))).toEqual(
      JSON.parse(text),
    );
  });

  it('list the current secret first and the previous one after it, space-separated; either secret verifies', () => {
    const current = `whsec_${randomBytes(32).toString('base64')}`;
    const previous = `whsec_${randomBytes(32).toString('base64')}`;
    const seconds = nowSeconds();
    const header = standardSignatureHeader(ID, seconds, BODY, [current, previous]);
    expect(header.split(' ')).toEqual([signStandard(ID, seconds, BODY, current), signStandard(ID, seconds, BODY, previous)]);
    expect(() => new Webhook(current).verify(BODY, headers(seconds, header))).not.toThrow();
    expect(() => new Webhook(previous).verify(BODY, headers(seconds, header))).not.toThrow();
    expect(() => new Webhook(`whsec_${randomBytes(32).toString('base64')}`).verify(BODY, headers(seconds, header))).toThrow(/No matching signature/);
  });

  it('are refused by the package when stale, or when the id, time or body differ', () => {
    const secret = `whsec_${randomBytes(32).toString('base64')}`;
    const old = nowSeconds() - 10 * 60;
    expect(() => new Webhook(secret).verify(BODY, headers(old, signStandard(ID, old, BODY, secret)))).toThrow(/too old/);
    const seconds = nowSeconds();
    const signature = signStandard(ID, seconds, BODY, secret);
    expect(() => new Webhook(secret).verify(`${BODY} `, headers(seconds, signature))).toThrow();
    expect(() => new Webhook(secret).verify(BODY, headers(seconds - 1, signature))).toThrow();
    expect(() => new Webhook(secret).verify(BODY, { ...headers(seconds, signature), 'webhook-id': 'another' })).toThrow();
  });

  describe('secrets not in the issued form', () => {
    it('whsec_ + URL-safe base64 (issued before): keyed with the bytes it decodes to', () => {
      const bytes = Buffer.from('fbff'.repeat(16), 'hex');
      const secret = `whsec_${bytes.toString('base64url')}`;
      expect(secret).toMatch(/[-_]/);
      expect(standardKey(secret)).toEqual(bytes);
      // The package cannot read this alphabet; the same key written in standard base64 verifies.
      expect(() => new Webhook(secret)).toThrow();
      expect(standardSecret(secret)).toBe(`whsec_${bytes.toString('base64')}`);
      const seconds = nowSeconds();
      expect(() => new Webhook(standardSecret(secret)).verify(BODY, headers(seconds, signStandard(ID, seconds, BODY, secret)))).not.toThrow();
      expect(() => new Webhook(bytes, { format: 'raw' }).verify(BODY, headers(seconds, signStandard(ID, seconds, BODY, secret)))).not.toThrow();
    });

    it.each([['a-plain-secret'], ['whsec_'], ['whsec_not base64!'], ['whsec_abcde']])('%s: keyed with its own UTF-8 bytes (the package\'s raw format)', (secret) => {
      expect(standardKey(secret)).toEqual(Buffer.from(secret, 'utf8'));
      const seconds = nowSeconds();
      const signature = signStandard(ID, seconds, BODY, secret);
      expect(() => new Webhook(secret, { format: 'raw' }).verify(BODY, headers(seconds, signature))).not.toThrow();
      expect(() => new Webhook(standardSecret(secret)).verify(BODY, headers(seconds, signature))).not.toThrow();
    });
  });
});
