import { z } from 'zod';

/**
 * An http(s) URL. The refinement runs even where `.url()` failed (zod 4): `new URL` would throw an error carrying the
 * whole string, credentials included, which the start prints; `URL.canParse` comes first.
 */
export const httpUrl = z
  .string()
  .url()
  .refine((value) => URL.canParse(value) && /^https?:$/.test(new URL(value).protocol), 'must be an http(s) URL');
