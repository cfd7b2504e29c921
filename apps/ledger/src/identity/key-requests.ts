import { z } from 'zod';
import { ROLES, TENANT_PATTERN } from './principal.js';

// Apart from the controller, with no Nest in reach: the command line checks its flags with these before it loads the service.

const tenant = z.string().regex(TENANT_PATTERN, 'lowercase letters, digits and -, at most 63');

export const newKeyBody = z
  .object({
    name: z.string().regex(/^[\w .@-]{1,100}$/, 'letters, digits, space and . _ @ -, at most 100'),
    tenant: tenant.optional(),
    roles: z.array(z.enum(ROLES)).min(1).max(ROLES.length),
    // A person who also signs in through the OpenID provider names that identity, so that separation of duties
    // counts the key and the tokens as one reviewer.
    subject: z
      .string()
      .regex(
        /^(?:(?!jwt:)[\w.@:+-]{1,200}|jwt:[^\s#\p{Cc}]{1,500}#[^\p{Cc}]{1,255})$/u,
        'letters, digits and . _ @ : + -, at most 200; or a token subject jwt:<issuer>#<sub>',
      )
      .optional(),
    expiresAt: z.iso.datetime({ offset: true }).optional(),
  })
  .strict();

export const listQuery = z.object({ tenant: tenant.optional() }).strict();

/** A new key's fields as the admin route and the command line accept them (a ZodError naming the field). */
export function parseNewKey(input: unknown, now: number): z.infer<typeof newKeyBody> {
  const key = newKeyBody.parse(input ?? {});
  if (key.expiresAt !== undefined && Date.parse(key.expiresAt) <= now)
    throw new z.ZodError([
      { code: 'custom', path: ['expiresAt'], message: 'must be in the future', input: key.expiresAt },
    ]);
  return key;
}
