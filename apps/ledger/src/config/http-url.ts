import { z } from 'zod';

/**
 * An http(s) URL without credentials: a secret in a URL is sent where it cannot be masked (fetch refuses such a URL
 * and quotes it whole; a server may echo it), and the ledger's own secrets travel in headers and key lists. The
 * refinement runs even where `.url()` failed (zod 4): `new URL` would throw an error carrying the whole string,
 * which the start printed; `URL.canParse` comes first.
 */
export const httpUrl = z
  .string()
  .url()
  .refine(
    (value) => URL.canParse(value) && isHttpWithoutCredentials(new URL(value)),
    'must be an http(s) URL without credentials',
  );

function isHttpWithoutCredentials({ protocol, username, password }: URL): boolean {
  return /^https?:$/.test(protocol) && username === '' && password === '';
}
