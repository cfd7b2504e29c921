import { maskForms, secretForms } from './secret-forms.js';

describe('secretForms', () => {
  const secret = 'sk-live-0123456789abcdef';
  const maskedOf = (text: string) => maskForms(text, secretForms(secret));

  it('masks the secret as is, JSON-escaped and URL-encoded, keeping the text’s length', () => {
    const quoting = 'sk-"live"/0123456789abcdef';
    for (const text of [quoting, JSON.stringify(quoting), encodeURIComponent(quoting)]) {
      const masked = maskForms(`refused ${text}.`, secretForms(quoting));
      expect(masked).not.toMatch(/0123456789/);
      expect(masked).toHaveLength(`refused ${text}.`.length);
    }
  });

  it('masks it inside base64, standard and URL-safe, whatever bytes come before and after it', () => {
    const secretWithSlashes = 'key??>>0123456789~~~~';
    for (const quoted of [secret, secretWithSlashes])
      for (let before = 0; before < 6; before += 1)
        for (let after = 0; after < 4; after += 1) {
          const bytes = Buffer.concat([Buffer.alloc(before, 'u:'), Buffer.from(quoted), Buffer.alloc(after, '@')]);
          for (const encoding of ['base64', 'base64url'] as const) {
            const encoded = bytes.toString(encoding);
            const masked = maskForms(`Authorization: Basic ${encoded}`, secretForms(quoted));
            // Only the characters that also carry a neighbour's bits are left: at most one at either end.
            const maskedRun = /\*+/.exec(masked)?.[0].length ?? 0;
            expect(maskedRun).toBeGreaterThanOrEqual(Math.floor((quoted.length * 4) / 3) - 2);
          }
        }
  });

  it('masks base64 quoted again: URL-encoded, or with its slashes escaped as PHP writes JSON', () => {
    // Bytes that make `+` and `/` in base64.
    const quoted = 'key??>>0123456789~~~~';
    const encoded = Buffer.from(`ledger:${quoted}`).toString('base64');
    expect(encoded).toContain('+');
    expect(encoded).toContain('/');
    const slashed = 'sk/live/0123456789abcdef';
    for (const [secret, text] of [
      [quoted, encodeURIComponent(encoded)],
      [quoted, encoded.replaceAll('/', '\\/')],
      [slashed, JSON.stringify(slashed).replaceAll('/', '\\/')],
    ])
      expect(maskForms(text, secretForms(secret))).toMatch(/\*{20}/);
  });

  it('masks no short secret, in any form, and leaves text that only resembles a secret', () => {
    expect(secretForms('ollama')).toEqual([]);
    expect(maskedOf('sk-live-0123456789abcdeX and c2stbGl2ZS0wMTIzNDU2Nzg5YWJjZGVY')).not.toContain('*');
    expect(maskedOf(Buffer.from(secret).toString('base64'))).toBe('*'.repeat(32));
  });
});
