import { chunkSchema, IGNORED_REASONS, SESSION_STATUSES } from '#core';
import { z } from 'zod';
import { jsonObject, positionNumber, type RouteContracts } from '../http/route-contract.js';
import {
  createMessageBody,
  createSessionBody,
  dialectQuery,
  forkBody,
  grantBody,
  historyQuery,
  pageQuery,
  readPointQuery,
  selectionBody,
  sessionFilters,
  translationBody,
} from './request-schemas.js';

/** A block in Cherry Studio's `MessageBlock` shape: only the fields its type uses are present. */
const block = z.looseObject({
  id: z.string(),
  messageId: z.string(),
  type: z.enum([
    'unknown',
    'main_text',
    'thinking',
    'image',
    'file',
    'tool',
    'error',
    'citation',
    'translation',
    'video',
  ]),
  status: z.enum(['pending', 'processing', 'streaming', 'success', 'error', 'paused']),
  createdAt: z.string(),
  updatedAt: z.string().optional(),
  content: z.unknown().optional(),
  toolId: z.string().optional(),
  toolName: z.string().optional(),
  arguments: z.unknown().optional(),
  error: jsonObject.optional(),
  metadata: jsonObject.optional(),
  citationReferences: z
    .array(z.object({ citationBlockId: z.string(), citationBlockSource: z.string().optional() }))
    .optional()
    .meta({ description: 'main_text: the citation blocks this text cites' }),
  file: jsonObject.optional().meta({ description: 'file, image: the attached file (Cherry FileMetadata)' }),
  url: z.string().optional().meta({ description: 'image: where the attached image is' }),
});

const messageStatus = z.enum(['processing', 'success', 'error', 'paused']);
const message = z.object({
  id: z.string(),
  role: z.enum(['user', 'assistant', 'system', 'tool']),
  parentId: z.string().nullable(),
  model: z.string().nullable(),
  content: z.string().nullable(),
  status: messageStatus,
  createdAt: z.string(),
  position: positionNumber,
  lastSeq: z.number().int().meta({ description: "the producer's last recorded seq: the next batch starts after it" }),
  blocks: z.array(block),
});

const forkReference = z.object({ sessionId: z.string(), position: positionNumber, messageId: z.string().nullable() });
const header = {
  id: z.string(),
  title: z.string().nullable(),
  metadata: jsonObject,
  createdAt: z.string(),
  forkedFrom: forkReference.nullable(),
  position: positionNumber.meta({ description: 'the log position this read reflects' }),
};

const session = z.object({
  ...header,
  messages: z.array(
    message.extend({ siblings: z.object({ ids: z.array(z.string()), index: z.number(), count: z.number() }) }),
  ),
});

const tree = z.object({
  ...header,
  roots: z.array(z.string()),
  selectedRoot: z.string().nullable(),
  activePath: z.array(z.string()),
  messages: z.array(
    message.omit({ content: true, lastSeq: true, blocks: true }).extend({
      children: z.array(z.string()),
      selectedChild: z.string().nullable(),
    }),
  ),
});

const history = z.looseObject({
  format: z.enum(['openai', 'anthropic', 'openai-responses']),
  sessionId: z.string(),
  position: positionNumber,
  messages: z.array(jsonObject).optional().meta({ description: 'openai, anthropic: the messages to send' }),
  system: z.unknown().optional().meta({ description: 'anthropic: the system prompt' }),
  instructions: z.string().optional().meta({ description: 'openai-responses' }),
  input: z.array(jsonObject).optional().meta({ description: 'openai-responses: the input items' }),
});

const appended = z.object({
  appended: z.number().int(),
  duplicates: z.number().int().meta({ description: 'seqs already recorded with the same content' }),
  ignored: z
    .array(z.object({ seq: z.number().int(), reason: z.enum(IGNORED_REASONS) }))
    .meta({ description: 'chunks recorded that changed nothing on the message, and why' }),
  position: positionNumber,
});

const created = z.object({ id: z.string(), position: positionNumber });
const recordedEvent = z.looseObject({
  id: z.string(),
  streamId: z.string(),
  type: z.string(),
  data: z.unknown(),
  revision: z.number().int(),
  position: positionNumber,
  metadata: jsonObject,
});

const sessionPage = z.object({
  sessions: z.array(
    z.object({
      sessionId: z.string(),
      title: z.string().nullable(),
      model: z.string().nullable(),
      status: z.enum(SESSION_STATUSES),
      metadata: jsonObject.nullable(),
      createdAt: z.string(),
      lastActivityAt: z.string(),
      messageCount: z.number().int(),
      usage: z.object({ promptTokens: z.number(), completionTokens: z.number(), totalTokens: z.number() }),
      hasPendingApprovals: z.boolean(),
      hasErrors: z.boolean(),
    }),
  ),
  nextCursor: z.string().nullable(),
});

const SESSION_NOT_FOUND = { 404: 'no such session (another tenant’s is not found either)' };
const READ_ERRORS = {
  ...SESSION_NOT_FOUND,
  422: '`?at` or `?minPosition` beyond the log head (`position_beyond_head`)',
  503: 'the read models did not reach `?minPosition` (or your own last write) within 5 s; retry',
};
const readDescription =
  'From the read models; `?minPosition=p` waits (up to 5 s) until they reflect `p`, and a read by a credential ' +
  "waits the same way for that credential's latest write on this instance. `?at=p` folds the log as of `p` instead.";
const REPEAT = 'the same create again (same id and body): the original answer';
/** The session holds its quota, or this would take it past (decision 0037). */
const SESSION_FULL = '`session_full` (decision 0037)';

export const SESSIONS_CONTRACT: RouteContracts = {
  'POST /v1/sessions': {
    summary: 'Open a session',
    body: { schema: createSessionBody, required: false },
    responses: { 201: { description: 'opened', schema: created }, 200: { description: REPEAT, schema: created } },
    errors: {
      409: `\`session_exists\`: the id is taken with another body; \`field\` names the first difference; ${SESSION_FULL}`,
    },
  },
  'POST /v1/sessions/:sid/messages': {
    summary: 'Create a message',
    description:
      '`parentId` omitted: a child of the active leaf; `null`: a new top-level message. An assistant message ' +
      'given its whole `content` is complete.',
    body: { schema: createMessageBody },
    responses: {
      201: { description: 'created and selected', schema: created.extend({ parentId: z.string().nullable() }) },
      200: { description: REPEAT, schema: created.extend({ parentId: z.string().nullable() }) },
    },
    errors: {
      ...SESSION_NOT_FOUND,
      409: `\`message_exists\`: the id is taken with another body; \`field\` names the first difference; ${SESSION_FULL}`,
      422: '`parent_not_found`',
    },
  },
  'POST /v1/sessions/:sid/messages/:mid/chunks': {
    summary: 'Append chunks to an assistant message',
    description:
      'A JSON array or NDJSON of Cherry chunks `{seq, type, …}`; with `?dialect=…&seq=N` a provider’s own stream ' +
      'events instead. A repeated seq with the same content is a duplicate; other content or a gap is 409.',
    query: dialectQuery,
    body: {
      schema: z.array(z.union([chunkSchema, jsonObject.meta({ description: 'a provider event (?dialect=)' })])),
      mediaTypes: ['application/json', 'application/x-ndjson'],
    },
    responses: { 200: { description: 'recorded', schema: appended } },
    errors: {
      404: 'no such session or message',
      409: `\`seq_gap\` (naming the expected seq), \`seq_conflict\`, \`dialect_conflict\`; ${SESSION_FULL}`,
      422: '`not_assistant`',
    },
  },
  'POST /v1/sessions/:sid/messages/:mid/translations': {
    summary: 'Open a translation block on an assistant message',
    description:
      'The block goes after the message’s blocks; its content comes as `translation.delta` / `translation.complete` ' +
      'chunks on the chunk route from `nextSeq` on. A translation never enters the model history.',
    body: { schema: translationBody },
    responses: {
      201: {
        description: 'opened',
        schema: z.object({
          id: z.string(),
          messageId: z.string(),
          nextSeq: z.number().int(),
          position: positionNumber,
        }),
      },
    },
    errors: {
      404: 'no such session or message',
      409: `\`message_full\`: the message holds the most blocks a message may; ${SESSION_FULL}`,
      422: '`not_assistant`, `block_not_found` (the `sourceBlockId`)',
    },
  },
  'POST /v1/sessions/:sid/fork': {
    summary: 'Fork a session as of a position, optionally cut at a message',
    body: { schema: forkBody },
    responses: {
      201: { description: 'forked', schema: created.extend({ forkedFrom: forkReference }) },
      200: { description: REPEAT, schema: created.extend({ forkedFrom: forkReference }) },
    },
    errors: {
      ...SESSION_NOT_FOUND,
      409: `\`session_exists\`; ${SESSION_FULL}`,
      422: '`atPosition` beyond the log head (`position_beyond_head`); `fork_too_deep` (naming `sourceSessionId`)',
    },
  },
  'PUT /v1/sessions/:sid/messages/:mid/selection': {
    summary: 'Select a branch under a message',
    body: { schema: selectionBody },
    responses: {
      200: {
        description: 'selected',
        schema: z.object({ parentId: z.string().nullable(), childId: z.string(), position: positionNumber }),
      },
    },
    errors: { 404: 'no such session or message', 409: SESSION_FULL, 422: '`not_a_child`' },
  },
  'PUT /v1/sessions/:sid/selection': {
    summary: 'Select among the top-level messages',
    body: { schema: selectionBody },
    responses: {
      200: {
        description: 'selected',
        schema: z.object({ parentId: z.null(), childId: z.string(), position: positionNumber }),
      },
    },
    errors: { ...SESSION_NOT_FOUND, 409: SESSION_FULL, 422: '`not_a_child`' },
  },
  'POST /v1/sessions/:sid/writers': {
    summary: 'Let other subjects write to the session',
    body: { schema: grantBody },
    responses: {
      200: {
        description: 'granted',
        schema: z.object({ owner: z.string().nullable(), writers: z.array(z.string()), position: positionNumber }),
      },
    },
    errors: { ...SESSION_NOT_FOUND, 409: SESSION_FULL },
  },
  'GET /v1/sessions': {
    summary: "Find the tenant's sessions, newest activity first",
    description:
      '`q`: full-text over titles, metadata values and message text (web-search syntax, words as written); ' +
      '`from`/`to` bound `lastActivityAt`; `cursor`: the previous page’s `nextCursor`. Empty parameters count as ' +
      "absent; unknown ones are refused. Waits (up to 5 s) until the list reflects the credential's latest write on " +
      'this instance.',
    query: sessionFilters,
    responses: { 200: { description: 'one page', schema: sessionPage } },
    errors: { 503: READ_ERRORS[503] },
  },
  'GET /v1/sessions/:sid': {
    summary: 'The session and its active path',
    description: readDescription,
    query: readPointQuery,
    responses: { 200: { description: 'the session', schema: session } },
    errors: READ_ERRORS,
  },
  'GET /v1/sessions/:sid/tree': {
    summary: 'Every message of the session as a tree',
    description: readDescription,
    query: readPointQuery,
    responses: { 200: { description: 'the tree', schema: tree } },
    errors: READ_ERRORS,
  },
  'GET /v1/sessions/:sid/history': {
    summary: 'The active path as model input',
    description: readDescription,
    query: historyQuery,
    responses: { 200: { description: 'the history in the format asked', schema: history } },
    errors: READ_ERRORS,
  },
  'GET /v1/sessions/:sid/messages/:mid': {
    summary: 'One message with its blocks',
    description: readDescription,
    query: readPointQuery,
    responses: { 200: { description: 'the message', schema: message } },
    errors: { ...READ_ERRORS, 404: 'no such session or message' },
  },
  'GET /v1/sessions/:sid/events': {
    summary: "The session's raw events, paged",
    query: pageQuery,
    responses: {
      200: {
        description: 'a page; `next` is the `from` of the next one',
        schema: z.object({ events: z.array(recordedEvent), next: positionNumber.nullable() }),
      },
    },
    errors: { ...SESSION_NOT_FOUND, 422: '`from` beyond the log head (`position_beyond_head`)' },
  },
};
