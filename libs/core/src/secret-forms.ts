/**
 * Secrets this long or longer are masked where a text may quote them. A shorter one (a local server's placeholder key
 * such as `ollama`) is no secret, and masking it would change the text.
 */
const MASKED_SECRET_LENGTH = 16;

/**
 * The forms a secret takes in a text that quotes it: itself and what base64 holds of it (standard and URL-safe: a
 * server may echo `Authorization: Basic …` or a token it encoded), each as is, JSON-escaped (also with `\/`, as PHP
 * writes it) and URL-encoded; none for a short one. Base64 broken into lines (MIME's 76 characters) is not found.
 */
export function secretForms(secret: string): string[] {
  if (secret.length < MASKED_SECRET_LENGTH) return [];
  const quoted = (form: string) => [
    form,
    JSON.stringify(form).slice(1, -1),
    form.replaceAll('/', '\\/'),
    encodeURIComponent(form),
  ];
  return [...new Set([secret, ...base64Forms(secret)].flatMap(quoted))];
}

/**
 * What base64 holds of `secret` wherever it starts in the encoded bytes: one form for each of the three alignments to
 * the encoding's 3-byte groups, the characters all of whose bits are the secret's (a character or two at either end
 * also carry the neighbouring bytes' bits, and so differ from text to text).
 */
function base64Forms(secret: string): string[] {
  const bytes = Buffer.from(secret);
  return [0, 1, 2].flatMap((offset) => {
    const total = offset + bytes.length;
    const firstOwn = [0, 2, 3][offset];
    const lastOwn = Math.floor(total / 3) * 4 + (total % 3);
    const encoded = Buffer.concat([Buffer.alloc(offset), bytes])
      .toString('base64')
      .slice(firstOwn, lastOwn);
    return [encoded, encoded.replaceAll('+', '-').replaceAll('/', '_')];
  });
}

/** `text` with every occurrence of each form overwritten by as many `*`, so its length holds. */
export function maskForms(text: string, forms: readonly string[]): string {
  return forms.reduce((masked, form) => masked.replaceAll(form, '*'.repeat(form.length)), text);
}
