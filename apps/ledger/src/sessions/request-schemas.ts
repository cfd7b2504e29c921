import { isJsonObject, SESSION_STATUSES, storableJson } from '#core';
import { z } from 'zod';
import { ID_CHARACTERS, ID_MAX_LENGTH, ID_RULE } from '../http/path-ids.pipe.js';

/** An id a client chooses (a session's, a message's), as a path segment names it. */
export const clientId = z.string().min(1).max(ID_MAX_LENGTH).regex(ID_CHARACTERS, ID_RULE);
const POSITION_RULE = 'must be a log position (a non-negative integer)';
/**
 * A position as a JSON number or in decimal digits: `BigInt` alone also reads `0x10`, `0b1` and blanks (as 0), so one
 * position had several spellings.
 */
export const position = z
  .union([z.int({ error: POSITION_RULE }).nonnegative(POSITION_RULE), z.string().regex(/^[0-9]+$/, POSITION_RULE)], {
    error: POSITION_RULE,
  })
  .transform((value) => BigInt(value))
  .meta({ type: 'integer', minimum: 0, description: 'a log position' });

/** Subjects as credentials carry them: `subject:<name>`, `key:<id>` or `jwt:<issuer>#<sub>`. */
const subject = z
  .string()
  .min(1)
  .max(600)
  .regex(/^(subject|key|jwt):\S+$/, 'a subject: subject:<name>, key:<key id> or jwt:<issuer>#<sub>');
const writers = z.array(subject).max(100);

/** A user message's files, by reference (issue 18): the ledger stores the reference, never fetches the file. */
export const MAX_ATTACHMENTS = 20;
export const MAX_ATTACHMENT_BYTES = 2 ** 40;

/**
 * An http(s) URL, kept as the WHATWG parser resolves it (what any client fetching it will use):
 * no other scheme (`javascript:`, `file:`, `data:`), no credentials in it, no spaces or controls.
 */
const attachmentUrl = z
  .string()
  .min(1)
  .max(2048)
  .regex(/^[^\s\p{Cc}]+$/u, 'must hold no spaces or control characters')
  .transform((value, context) => {
    const url = parsedUrl(value);
    if (!url || (url.protocol !== 'https:' && url.protocol !== 'http:'))
      context.addIssue({ code: 'custom', message: 'must be an http or https URL' });
    else if (url.username !== '' || url.password !== '')
      context.addIssue({ code: 'custom', message: 'must not hold credentials' });
    else return url.href;
    return z.NEVER;
  });

function parsedUrl(value: string): URL | undefined {
  try {
    return new URL(value);
  } catch {
    return undefined;
  }
}

const attachment = z
  .object({
    name: z
      .string()
      .min(1)
      .max(255)
      .regex(/^[^/\\\p{Cc}]+$/u, 'a file name: no path separators or control characters'),
    mimeType: z
      .string()
      .max(255)
      .regex(/^[a-z0-9][a-z0-9!#$&^_.+-]*\/[a-z0-9][a-z0-9!#$&^_.+-]*$/, 'a media type such as image/png, lower case'),
    size: z.number().int().nonnegative().max(MAX_ATTACHMENT_BYTES),
    sha256: z.string().regex(/^[0-9a-f]{64}$/, 'the SHA-256 of the file: 64 lower-case hex digits'),
    url: attachmentUrl,
  })
  .strict();

/**
 * A session's metadata: any JSON object, its contents checked by `storableJson` first. Checked as an object, not
 * member by member: a record schema parsed and copied each member again (120 ms for 75,000 members).
 */
const metadata = z
  .custom<Record<string, unknown>>(isJsonObject, { error: 'must be a JSON object' })
  .meta({ type: 'object', additionalProperties: {} });

// Every body schema refuses unstorable text (NUL, unpaired surrogates) and over-deep nesting first.
export const createSessionBody = storableJson(
  z
    .object({
      title: z.string().max(500).optional(),
      metadata: metadata.optional(),
      id: clientId.optional(),
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
      parentId: clientId.nullable().optional(),
      model: z.string().max(200).optional(),
      id: clientId.optional(),
      attachments: z.array(attachment).max(MAX_ATTACHMENTS).optional(),
    })
    .strict()
    .refine((body) => body.role === 'user' || body.attachments === undefined, {
      message: 'only a user message attaches files',
      path: ['attachments'],
    }),
);

export const selectionBody = storableJson(z.object({ childId: clientId }).strict());

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
      messageId: clientId.optional(),
      title: z.string().max(500).optional(),
      metadata: metadata.optional(),
      id: clientId.optional(),
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
  dialect: z.string().max(100).default('cherry'),
  seq: z
    .string()
    .regex(/^[1-9][0-9]{0,14}$/, 'must be a positive whole number')
    .transform(Number)
    .optional(),
});

/** A BCP 47 language tag (`en`, `zh-CN`, Cherry's `en-us`), as `Intl` reads one. */
const languageTag = z
  .string()
  .max(35)
  .regex(/^[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*$/, 'a language tag such as en, fr or zh-CN')
  .refine((tag) => {
    try {
      return Intl.getCanonicalLocales(tag).length === 1;
    } catch {
      return false;
    }
  }, 'a language tag such as en, fr or zh-CN');

export const translationBody = storableJson(
  z
    .object({
      targetLanguage: languageTag,
      sourceLanguage: languageTag.optional(),
      sourceBlockId: z.string().min(1).max(600).optional(),
    })
    .strict(),
);

const flag = z.enum(['true', 'false'], { error: 'must be true or false' }).transform((value) => value === 'true');
/** PostgreSQL refuses the year 0000, which the ISO form allows. */
const instant = z.iso
  .datetime({ offset: true, error: 'must be an ISO 8601 time with its offset, e.g. 2026-01-31T12:00:00Z' })
  .refine((value) => !value.startsWith('0000'), 'the year must be 0001 or later');

/**
 * Finding sessions: every filter optional; an empty one (`?model=`) counts as not given, so a form
 * can send all its fields. Unknown parameters are refused, so a misspelt filter never silently
 * lists everything.
 */
export const sessionFilters = z
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
  .strict();

export const listSessionsQuery = storableJson(
  z.preprocess(
    (query) =>
      typeof query === 'object' && query !== null
        ? Object.fromEntries(Object.entries(query).filter(([, value]) => value !== ''))
        : query,
    sessionFilters.refine((query) => !query.from || !query.to || Date.parse(query.from) <= Date.parse(query.to), {
      message: 'must not be before from',
      path: ['to'],
    }),
  ),
);
