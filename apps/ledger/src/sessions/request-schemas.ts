import { SESSION_STATUSES, storableJson } from '#core';
import { z } from 'zod';
import { ID_CHARACTERS, ID_MAX_LENGTH } from '../http/path-ids.pipe.js';

const id = z.string().min(1).max(ID_MAX_LENGTH).regex(ID_CHARACTERS, 'letters, digits and . _ : - only');
const position = z.coerce
  .bigint({ error: 'must be a log position (a non-negative integer)' })
  .nonnegative('must be a log position (a non-negative integer)');

/** Subjects as credentials carry them: `subject:<name>`, `key:<id>` or `jwt:<issuer>#<sub>`. */
const subject = z
  .string()
  .min(1)
  .max(600)
  .regex(/^(subject|key|jwt):\S+$/, 'a subject: subject:<name>, key:<key id> or jwt:<issuer>#<sub>');
const writers = z.array(subject).max(100);

// Every body schema refuses unstorable text (NUL, unpaired surrogates) and over-deep nesting first.
export const createSessionBody = storableJson(
  z
    .object({
      title: z.string().max(500).optional(),
      metadata: z.record(z.string(), z.unknown()).optional(),
      id: id.optional(),
      writers: writers.optional(),
    })
    .strict(),
);

export const grantBody = storableJson(z.object({ writers: writers.min(1) }).strict());

export const createMessageBody = storableJson(
  z
    .object({
      role: z.enum(['user', 'assistant', 'system', 'tool']),
      content: z.string().optional(),
      parentId: id.nullable().optional(),
      model: z.string().max(200).optional(),
      id: id.optional(),
    })
    .strict(),
);

export const selectionBody = storableJson(z.object({ childId: id }).strict());

export const forkBody = storableJson(
  z
    .object({
      atPosition: z
        .number()
        .int()
        .nonnegative()
        .or(z.string().regex(/^\d+$/))
        .transform((value) => BigInt(value))
        .optional(),
      messageId: id.optional(),
      title: z.string().max(500).optional(),
      metadata: z.record(z.string(), z.unknown()).optional(),
      id: id.optional(),
      writers: writers.optional(),
    })
    .strict()
    .refine((body) => body.atPosition !== undefined || body.messageId !== undefined, {
      message: 'give atPosition, messageId or both',
      path: ['atPosition'],
    }),
);

/** Which state a read sees: `?at=` folds the log as of a position; `?minPosition=` waits for the read models to reach one. */
export const readPointQuery = z.object({ at: position.optional(), minPosition: position.optional() });

export const historyQuery = readPointQuery.extend({
  format: z.enum(['openai', 'anthropic', 'openai-responses']).default('openai'),
  includeThinking: z
    .enum(['true', 'false'])
    .default('false')
    .transform((value) => value === 'true'),
});

export const pageQuery = z.object({
  from: position.default(0n),
  limit: z.coerce.number().int().min(1).max(1_000).default(100),
});

/** The chunk route's dialect, and for a provider dialect the producer's number of the first event in the body. */
export const dialectQuery = z.object({
  dialect: z.string().default('cherry'),
  seq: z
    .string()
    .regex(/^[1-9][0-9]{0,14}$/, 'must be a positive whole number')
    .transform(Number)
    .optional(),
});

const flag = z.enum(['true', 'false'], { error: 'must be true or false' }).transform((value) => value === 'true');
const instant = z.iso.datetime({
  offset: true,
  error: 'must be an ISO 8601 time with its offset, e.g. 2026-01-31T12:00:00Z',
});

/**
 * Finding sessions: every filter optional; an empty one (`?model=`) counts as not given, so a form
 * can send all its fields. Unknown parameters are refused, so a misspelt filter never silently
 * lists everything.
 */
export const listSessionsQuery = storableJson(
  z.preprocess(
    (query) =>
      typeof query === 'object' && query !== null
        ? Object.fromEntries(Object.entries(query).filter(([, value]) => value !== ''))
        : query,
    z
      .object({
        q: z.string().max(1_000).optional(),
        model: z.string().max(200).optional(),
        status: z.enum(SESSION_STATUSES).optional(),
        hasPendingApprovals: flag.optional(),
        hasErrors: flag.optional(),
        from: instant.optional(),
        to: instant.optional(),
        cursor: z.string().max(1_000).optional(),
        limit: z.coerce.number().int().min(1).max(200).default(50),
      })
      .strict()
      .refine((query) => !query.from || !query.to || Date.parse(query.from) <= Date.parse(query.to), {
        message: 'must not be before from',
        path: ['to'],
      }),
  ),
);
