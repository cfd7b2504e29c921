/**
 * Secrets this long or longer are masked where a text may quote them. A shorter one (a local server's placeholder key
 * such as `ollama`) is no secret, and masking it would change the text.
 */
const MASKED_SECRET_LENGTH = 16;

/** The forms a secret takes in a text that quotes it: as is, JSON-escaped, URL-encoded; none for a short one. */
export function secretForms(secret: string): string[] {
  if (secret.length < MASKED_SECRET_LENGTH) return [];
  return [...new Set([secret, JSON.stringify(secret).slice(1, -1), encodeURIComponent(secret)])];
}

/** `text` with every occurrence of each form overwritten by as many `*`, so its length holds. */
export function maskForms(text: string, forms: readonly string[]): string {
  return forms.reduce((masked, form) => masked.replaceAll(form, '*'.repeat(form.length)), text);
}
