import { previousSecretOf } from '../src';

describe('previousSecretOf', () => {
  const expiresAt = new Date('2026-01-02T00:00:00Z');

  it('is the replaced secret and the end of its overlap while a rotation keeps one', () => {
    expect(previousSecretOf({ secreto_anterior: 'whsec_old', secreto_anterior_expira_en: expiresAt })).toEqual({ secret: 'whsec_old', expiresAt });
  });

  it('is null when the webhook has none', () => {
    expect(previousSecretOf({ secreto_anterior: null, secreto_anterior_expira_en: null })).toBeNull();
  });
});
