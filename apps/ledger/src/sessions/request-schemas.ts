import { z } from 'zod';

const id = z.string().min(1).max(200).regex(/^[A-Za-z0-9._:-]+$/, 'letters, digits and . _ : - only');

export const createSessionBody = z.object({ title: z.string().max(500).optional(), metadata: z.record(z.string(), z.unknown()).optional(), id: id.optional() }).strict();

export const createMessageBody = z
  .object({
    role: z.enum(['user', 'assistant', 'system', 'tool']),
    content: z.string().optional(),
    parentId: id.nullable().optional(),
    model: z.string().max(200).optional(),
    id: id.optional(),
  })
  .strict();

export const positionQuery = z.coerce.bigint().nonnegative();
export const pageQuery = z.object({ from: z.coerce.bigint().nonnegative().default(0n), limit: z.coerce.number().int().min(1).max(1_000).default(100) });
