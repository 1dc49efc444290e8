import { randomBytes, randomUUID } from 'node:crypto';
import { createSecretBox, DEVELOPMENT_SECRETS_KEY, isPlaintextSecret, loadSettings, SealedSecretError, sealedKeyIdOf } from '@svc/platform';

/** The keys as the services get them: SECRETS_KEY parsed by the settings. */
const keysOf = (...keys: Buffer[]) => loadSettings('test', { SECRETS_KEY: keys.map((k) => k.toString('base64')).join(',') }, () => ({})).secretsKeys;

const SECRET = `whsec_${randomBytes(32).toString('base64')}`;

function unopened(run: () => unknown): SealedSecretError {
  try {
    run();
  } catch (err) {
    if (err instanceof SealedSecretError) return err;
    throw err;
  }
  throw new Error('it opened');
}

describe('sealed webhook secrets (AES-256-GCM under SECRETS_KEY)', () => {
  const oldKey = randomBytes(32);
  const newKey = randomBytes(32);
  const [oldId, newId] = keysOf(oldKey, newKey).map((k) => k.id);
  const id = randomUUID();

  it('stores v1:<keyId>:<base64 of nonce | ciphertext | tag> under the first key, and opens it back', () => {
    const box = createSecretBox(keysOf(newKey, oldKey));
    const sealed = box.seal(id, SECRET);
    expect(sealed).toMatch(new RegExp(`^v1:${newId}:[A-Za-z0-9+/]+=*$`));
    expect(sealedKeyIdOf(sealed)).toBe(newId);
    expect(Buffer.from(sealed.split(':')[2]!, 'base64')).toHaveLength(12 + Buffer.byteLength(SECRET) + 16);
    expect(sealed).not.toContain(SECRET.slice('whsec_'.length, 20));
    expect(box.open(id, sealed)).toBe(SECRET);
    expect(isPlaintextSecret(sealed)).toBe(false);
    expect(isPlaintextSecret(SECRET)).toBe(true);
  });

  it('a fresh nonce per value: the same secret seals differently each time', () => {
    const box = createSecretBox(keysOf(newKey));
    const values = new Set(Array.from({ length: 50 }, () => box.seal(id, SECRET)));
    expect(values.size).toBe(50);
  });

  it('every key of the list opens what it sealed, wherever it stands; the first seals', () => {
    const before = createSecretBox(keysOf(oldKey)).seal(id, SECRET);
    const after = createSecretBox(keysOf(newKey, oldKey));
    expect(after.sealingKeyId).toBe(newId);
    expect(after.keyIds).toEqual([newId, oldId]);
    expect(after.open(id, before)).toBe(SECRET);
    expect(createSecretBox(keysOf(oldKey, newKey)).open(id, after.seal(id, SECRET))).toBe(SECRET);
  });

  it('refuses a value sealed under a key the list lacks, naming the key id and never the value', () => {
    const sealed = createSecretBox(keysOf(oldKey)).seal(id, SECRET);
    const err = unopened(() => createSecretBox(keysOf(newKey)).open(id, sealed));
    expect(err).toMatchObject({ reason: 'unknown-key', keyId: oldId, webhookId: id });
    expect(err.message).toContain(oldId);
    expect(err.message).not.toContain(sealed.split(':')[2]!);
  });

  it('refuses an altered value, whichever byte: nonce, ciphertext or tag', () => {
    const box = createSecretBox(keysOf(newKey));
    const sealed = box.seal(id, SECRET);
    const [prefix, kid, text] = sealed.split(':') as [string, string, string];
    const body = Buffer.from(text, 'base64');
    for (const at of [0, 11, 12, 20, body.length - 16, body.length - 1]) {
      const altered = Buffer.from(body);
      altered[at] = altered[at]! ^ 0x01;
      expect(unopened(() => box.open(id, `${prefix}:${kid}:${altered.toString('base64')}`))).toMatchObject({ reason: 'altered', keyId: newId });
    }
    // Cut short, or not a sealed value at all.
    expect(unopened(() => box.open(id, `${prefix}:${kid}:${body.subarray(0, 20).toString('base64')}`)).reason).toBe('malformed');
    expect(unopened(() => box.open(id, SECRET)).reason).toBe('malformed');
    expect(unopened(() => box.open(id, 'v1:zzzz:abc')).reason).toBe('malformed');
  });

  it("is bound to its webhook: a value moved to another row does not open there", () => {
    const box = createSecretBox(keysOf(newKey));
    const sealed = box.seal(id, SECRET);
    expect(unopened(() => box.open(randomUUID(), sealed))).toMatchObject({ reason: 'altered' });
    // The id's spelling does not matter: Postgres gives it in lower case, a caller may not.
    expect(box.open(id.toUpperCase(), sealed)).toBe(SECRET);
  });

  it('without SECRETS_KEY (not production) the fixed development key seals, as the start-up warning says', () => {
    const settings = loadSettings('test', {}, () => ({}));
    expect(settings.secretsKeys).toEqual([DEVELOPMENT_SECRETS_KEY]);
    expect(settings.startWarnings).toContainEqual({ setting: 'SECRETS_KEY', message: expect.stringContaining('sealed with the fixed development key') });
    const box = createSecretBox(settings.secretsKeys);
    expect(sealedKeyIdOf(box.seal(id, SECRET))).toBe(DEVELOPMENT_SECRETS_KEY.id);
  });

  it('a key listed twice is one key', () => {
    const box = createSecretBox(keysOf(newKey, oldKey, newKey));
    expect(box.keyIds).toEqual([newId, oldId]);
  });
});
