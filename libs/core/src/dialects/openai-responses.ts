import { z } from 'zod';
import {
  completeArguments,
  DialectError,
  grownDelta,
  parseEvent,
  responseEnd,
  type StandIn,
  toolResponse,
  translateStandIns,
  type Translation,
  type Translator,
  type UnnumberedChunk,
} from './dialect.js';

/**
 * OpenAI Responses streaming (the `data:` payloads of `POST /v1/responses` with `stream: true`,
 * `ResponseStreamEvent` in the `openai` package) → Cherry chunks. Output items stream one after
 * another by `output_index`: a `message` item's `output_text` (and `refusal`) parts are text; a
 * `reasoning` item is one thinking block (its summary parts, or its reasoning text, joined by a
 * blank line) that keeps the item as it came, `encrypted_content` included, so the history can
 * send it back; a `function_call` item is a tool call named by its `call_id`, its arguments
 * streaming until the item is done. Url citations of a message become a web search result.
 * Other items (built-in tools) and their events are recorded and change no block.
 * `response.completed`/`incomplete` end the response with its status and usage; one that called
 * functions ends a tool round, and the next call's `response.created` starts over in the same
 * message. A whole `response` object (a call without `stream`) is translated as the events that
 * would stream it.
 */
type OpenItem =
  | { readonly kind: 'message'; readonly parts: number; readonly text: string | undefined }
  // `separator`: the blank line a new segment opens with, added to the text with the segment's first delta.
  | { readonly kind: 'reasoning'; readonly text: string; readonly separator: string }
  | { readonly kind: 'function_call'; readonly callId: string; readonly name: string; readonly arguments: string }
  | { readonly kind: 'other'; readonly type: string };

export interface OpenAiResponsesState {
  /** `round-ended`: a tool round ended, the next round may start. */
  readonly phase: 'before' | 'streaming' | 'round-ended' | 'ended';
  /** How many output items have started; the open one, if any, is the last. */
  readonly started: number;
  readonly open: OpenItem | undefined;
  readonly functionCalls: number;
  /** The provider's id of the response under way (or last ended): a later call names it as `previous_response_id`. */
  readonly responseId?: string;
}

const outputIndex = z.number().int().nonnegative();
const contentIndex = z.number().int().nonnegative();
const summaryIndex = z.number().int().nonnegative();
const anyItem = z.object({ type: z.string().min(1) }).passthrough();

const messageItem = z
  .object({
    type: z.literal('message'),
    content: z.array(
      z.discriminatedUnion('type', [
        z
          .object({ type: z.literal('output_text'), text: z.string(), annotations: z.array(anyItem).optional() })
          .passthrough(),
        z.object({ type: z.literal('refusal'), refusal: z.string() }).passthrough(),
      ]),
    ),
  })
  .passthrough();
const reasoningItem = z
  .object({
    type: z.literal('reasoning'),
    id: z.string().min(1),
    summary: z.array(z.object({ type: z.literal('summary_text'), text: z.string() }).passthrough()),
    content: z.array(z.object({ type: z.literal('reasoning_text'), text: z.string() }).passthrough()).nullish(),
    encrypted_content: z.string().nullish(),
  })
  .passthrough();
const functionCallItem = z
  .object({
    type: z.literal('function_call'),
    call_id: z.string().min(1),
    name: z.string().min(1),
    arguments: z.string(),
  })
  .passthrough();

type OutputItem =
  | z.infer<typeof messageItem>
  | z.infer<typeof reasoningItem>
  | z.infer<typeof functionCallItem>
  | { readonly type: 'other'; readonly itemType: string };

const ITEM_SCHEMAS = { message: messageItem, reasoning: reasoningItem, function_call: functionCallItem } as const;

/** An output item read by its type; a refusal names `field` and the item's own field under it. */
function parseItem(item: z.infer<typeof anyItem>, field: string): OutputItem {
  if (!Object.hasOwn(ITEM_SCHEMAS, item.type)) return { type: 'other', itemType: item.type };
  const schema = ITEM_SCHEMAS[item.type as keyof typeof ITEM_SCHEMAS];
  try {
    return parseEvent<OutputItem>(schema, item);
  } catch (error) {
    if (!(error instanceof DialectError)) throw error;
    throw new DialectError(error.field === '' ? field : `${field}.${error.field}`, error.message);
  }
}

const responseObject = z
  .object({
    id: z.string().nullish(),
    status: z.string().nullish(),
    usage: z.object({}).passthrough().nullish(),
    error: z.object({ code: z.string().nullish(), message: z.string() }).passthrough().nullish(),
    incomplete_details: z.object({}).passthrough().nullish(),
  })
  .passthrough();

/** Events that carry nothing a block shows: their content also comes in the events around them. */
const RECORDED_ONLY = [
  'response.queued',
  'response.in_progress',
  'response.output_text.done',
  'response.output_text.annotation.added',
  'response.refusal.done',
  'response.reasoning_summary_part.done',
  'response.reasoning_summary_text.done',
  'response.reasoning_text.done',
  'response.function_call_arguments.done',
  'response.audio.delta',
  'response.audio.done',
  'response.audio.transcript.delta',
  'response.audio.transcript.done',
  'response.code_interpreter_call.completed',
  'response.code_interpreter_call.in_progress',
  'response.code_interpreter_call.interpreting',
  'response.code_interpreter_call_code.delta',
  'response.code_interpreter_call_code.done',
  'response.compaction.compacting',
  'response.custom_tool_call_input.delta',
  'response.custom_tool_call_input.done',
  'response.file_search_call.completed',
  'response.file_search_call.in_progress',
  'response.file_search_call.searching',
  'response.image_generation_call.completed',
  'response.image_generation_call.generating',
  'response.image_generation_call.in_progress',
  'response.image_generation_call.partial_image',
  'response.mcp_call.completed',
  'response.mcp_call.failed',
  'response.mcp_call.in_progress',
  'response.mcp_call_arguments.delta',
  'response.mcp_call_arguments.done',
  'response.mcp_list_tools.completed',
  'response.mcp_list_tools.failed',
  'response.mcp_list_tools.in_progress',
  'response.shell_call_command.added',
  'response.shell_call_command.delta',
  'response.shell_call_command.done',
  'response.shell_call_output_content.delta',
  'response.shell_call_output_content.done',
  'response.web_search_call.completed',
  'response.web_search_call.in_progress',
  'response.web_search_call.searching',
] as const;

const streamEvent = z.discriminatedUnion('type', [
  z.object({ type: z.literal('response.created'), response: responseObject }).passthrough(),
  z
    .object({
      type: z.enum(['response.output_item.added', 'response.output_item.done']),
      output_index: outputIndex,
      item: anyItem,
    })
    .passthrough(),
  z
    .object({
      type: z.literal('response.content_part.added'),
      output_index: outputIndex,
      content_index: contentIndex,
      part: anyItem,
    })
    .passthrough(),
  z
    .object({ type: z.literal('response.content_part.done'), output_index: outputIndex, content_index: contentIndex })
    .passthrough(),
  z
    .object({
      type: z.enum(['response.output_text.delta', 'response.refusal.delta']),
      output_index: outputIndex,
      content_index: contentIndex,
      delta: z.string(),
    })
    .passthrough(),
  z
    .object({
      type: z.literal('response.reasoning_summary_part.added'),
      output_index: outputIndex,
      summary_index: summaryIndex,
    })
    .passthrough(),
  z
    .object({
      type: z.literal('response.reasoning_summary_text.delta'),
      output_index: outputIndex,
      summary_index: summaryIndex,
      delta: z.string(),
    })
    .passthrough(),
  z
    .object({
      type: z.literal('response.reasoning_text.delta'),
      output_index: outputIndex,
      content_index: contentIndex,
      delta: z.string(),
    })
    .passthrough(),
  z
    .object({ type: z.literal('response.function_call_arguments.delta'), output_index: outputIndex, delta: z.string() })
    .passthrough(),
  z
    .object({
      type: z.enum(['response.completed', 'response.incomplete', 'response.failed']),
      response: responseObject,
    })
    .passthrough(),
  z.object({ type: z.literal('error'), code: z.string().nullish(), message: z.string() }).passthrough(),
  z.object({ type: z.enum(RECORDED_ONLY) }).passthrough(),
]);

/** A whole response (`stream` off): its output items as they would be when each is done. */
const wholeResponse = z
  .object({
    object: z.literal('response'),
    status: z.enum(['completed', 'incomplete', 'failed']),
    output: z.array(anyItem),
  })
  .passthrough();

type StreamEvent = z.infer<typeof streamEvent>;
type Step = Translation<OpenAiResponsesState>;
const nothing = (state: OpenAiResponsesState): Step => ({ state, chunks: [] });

export const openAiResponsesTranslator: Translator<OpenAiResponsesState> = {
  initial: { phase: 'before', started: 0, open: undefined, functionCalls: 0 },
  translate(state, raw) {
    if (state.phase === 'ended') throw new DialectError('type', 'the stream has already ended');
    // After a tool round, the next call's response starts over.
    const round = state.phase === 'round-ended' ? openAiResponsesTranslator.initial : state;
    if ((raw as { object?: unknown } | null)?.object === 'response') {
      const whole = parseEvent(wholeResponse, raw);
      if (round.phase !== 'before') throw new DialectError('object', 'a whole response comes before any event');
      return translateStandIns(openAiResponsesTranslator, round, responseStandIns(whole, raw as object));
    }
    const event = parseEvent(streamEvent, raw);
    if (event.type === 'error') {
      const failure = { name: event.code ?? 'error', message: event.message };
      return { state: { ...round, phase: 'ended' }, chunks: [{ type: 'error', error: failure }] };
    }
    if (event.type === 'response.created') {
      if (round.phase !== 'before') throw new DialectError('type', 'response.created comes once, first');
      const responseId = event.response.id ?? undefined;
      return {
        state: { ...round, phase: 'streaming', ...(responseId ? { responseId } : {}) },
        chunks: [{ type: 'llm_response_created' }],
      };
    }
    if (round.phase === 'before') throw new DialectError('type', `${event.type} before response.created`);
    return translateInResponse(round, event);
  },
};

function translateInResponse(
  state: OpenAiResponsesState,
  event: Exclude<StreamEvent, { type: 'error' | 'response.created' }>,
): Step {
  switch (event.type) {
    case 'response.output_item.added':
      return startItem(state, event.output_index, parseItem(event.item, 'item'));
    case 'response.output_item.done':
      return finishItem(state, event.output_index, parseItem(event.item, 'item'));
    case 'response.content_part.added':
      return startPart(state, event);
    case 'response.content_part.done': {
      const open = openItem(state, event.output_index);
      if (open.kind !== 'message' || open.text === undefined) return nothing(state);
      if (event.content_index !== open.parts - 1) {
        throw new DialectError('content_index', `content part ${event.content_index} is not open`);
      }
      return {
        state: { ...state, open: { ...open, text: undefined } },
        chunks: [{ type: 'text.complete', text: open.text }],
      };
    }
    case 'response.output_text.delta':
    case 'response.refusal.delta': {
      const open = openItem(state, event.output_index);
      if (open.kind !== 'message' || open.text === undefined || event.content_index !== open.parts - 1) {
        throw new DialectError('content_index', `content part ${event.content_index} is not open`);
      }
      const delta = grownDelta('text.delta', open.text, event.delta);
      return { state: { ...state, open: { ...open, text: delta.text } }, chunks: [delta] };
    }
    case 'response.reasoning_summary_part.added':
      return startReasoningSegment(state, openItem(state, event.output_index, 'reasoning'));
    case 'response.reasoning_summary_text.delta':
    case 'response.reasoning_text.delta': {
      const open = openItem(state, event.output_index, 'reasoning');
      const delta = grownDelta('thinking.delta', open.text, open.separator + event.delta);
      return { state: { ...state, open: { ...open, text: delta.text, separator: '' } }, chunks: [delta] };
    }
    case 'response.function_call_arguments.delta': {
      const open = openItem(state, event.output_index, 'function_call');
      const args = open.arguments + event.delta;
      const response = toolResponse(open.callId, open.name, 'streaming', { partialArguments: args });
      return {
        state: { ...state, open: { ...open, arguments: args } },
        chunks: [{ type: 'mcp_tool_streaming', responses: [response], grownBy: event.delta }],
      };
    }
    case 'response.completed':
    case 'response.incomplete': {
      if (state.open) throw new DialectError('type', `${event.type} while output item ${state.started - 1} is open`);
      const { status, usage, incomplete_details: details } = event.response;
      const response = { status, ...(usage ? { usage } : {}), ...(details ? { incomplete_details: details } : {}) };
      const toolRound = state.functionCalls > 0;
      return {
        state: { ...state, phase: toolRound ? 'round-ended' : 'ended' },
        chunks: [responseEnd(toolRound, response)],
      };
    }
    case 'response.failed': {
      const error = event.response.error;
      const failure = { name: error?.code ?? 'failed', message: error?.message ?? 'the response failed' };
      return { state: { ...state, phase: 'ended' }, chunks: [{ type: 'error', error: failure }] };
    }
    default:
      return nothing(state);
  }
}

function startItem(state: OpenAiResponsesState, index: number, item: OutputItem): Step {
  if (state.open) throw new DialectError('output_index', `output item ${state.started - 1} is still open`);
  if (index !== state.started) {
    throw new DialectError('output_index', `expected output item ${state.started}, got ${index}`);
  }
  const next = { ...state, started: state.started + 1 };
  switch (item.type) {
    case 'message':
      return nothing({ ...next, open: { kind: 'message', parts: 0, text: undefined } });
    case 'reasoning':
      return {
        state: { ...next, open: { kind: 'reasoning', text: '', separator: '' } },
        chunks: [{ type: 'thinking.start' }],
      };
    case 'function_call': {
      const open = { kind: 'function_call' as const, callId: item.call_id, name: item.name, arguments: item.arguments };
      const response = toolResponse(open.callId, open.name, 'streaming', { partialArguments: open.arguments });
      return { state: { ...next, open }, chunks: [{ type: 'mcp_tool_streaming', responses: [response] }] };
    }
    case 'other':
      return nothing({ ...next, open: { kind: 'other', type: item.itemType } });
  }
}

/** The done item is the whole item: a reasoning item is kept as it came, a call's arguments are final. */
function finishItem(state: OpenAiResponsesState, index: number, item: OutputItem): Step {
  const open = openItem(state, index);
  if (typeOf(open) !== (item.type === 'other' ? item.itemType : item.type)) {
    throw new DialectError('item.type', `output item ${index} started as ${typeOf(open)}`);
  }
  if (open.kind === 'message' && open.text !== undefined) {
    throw new DialectError('type', `content part ${open.parts - 1} of output item ${index} is still open`);
  }
  const closed = { ...state, open: undefined };
  switch (item.type) {
    case 'message': {
      const citations = item.content.flatMap((part) =>
        part.type === 'output_text' ? (part.annotations ?? []).filter((note) => note.type === 'url_citation') : [],
      );
      const search: UnnumberedChunk = {
        type: 'llm_websearch_complete',
        llm_web_search: { source: 'openai', results: citations },
      };
      return { state: closed, chunks: citations.length > 0 ? [search] : [] };
    }
    case 'reasoning': {
      const { text, separator } = open as Extract<OpenItem, { kind: 'reasoning' }>;
      return { state: closed, chunks: [{ type: 'thinking.complete', text: text + separator, item }] };
    }
    case 'function_call': {
      const args = completeArguments(item.arguments);
      if (!args) throw new DialectError('item.arguments', `the arguments of ${item.call_id} are not a JSON object`);
      const response = toolResponse(item.call_id, item.name, 'pending', { arguments: args });
      return {
        state: { ...closed, functionCalls: state.functionCalls + 1 },
        chunks: [{ type: 'mcp_tool_pending', responses: [response] }],
      };
    }
    case 'other':
      return nothing(closed);
  }
}

function startPart(
  state: OpenAiResponsesState,
  event: Extract<StreamEvent, { type: 'response.content_part.added' }>,
): Step {
  const open = openItem(state, event.output_index);
  if (open.kind === 'reasoning' && event.part.type === 'reasoning_text') return startReasoningSegment(state, open);
  if (open.kind !== 'message' || (event.part.type !== 'output_text' && event.part.type !== 'refusal')) {
    throw new DialectError('part.type', `a ${typeOf(open)} item takes no ${event.part.type} part`);
  }
  if (open.text !== undefined) throw new DialectError('content_index', `content part ${open.parts - 1} is still open`);
  if (event.content_index !== open.parts) {
    throw new DialectError('content_index', `expected content part ${open.parts}, got ${event.content_index}`);
  }
  return { state: { ...state, open: { ...open, parts: open.parts + 1, text: '' } }, chunks: [{ type: 'text.start' }] };
}

/**
 * Summary parts (or reasoning text parts) of one reasoning item are one thinking text, a blank line apart; the
 * blank line comes with the segment's first delta, so that delta records what it adds to the text.
 */
function startReasoningSegment(state: OpenAiResponsesState, open: Extract<OpenItem, { kind: 'reasoning' }>): Step {
  return nothing({
    ...state,
    open: { ...open, separator: open.text + open.separator === '' ? '' : `${open.separator}\n\n` },
  });
}

function openItem(state: OpenAiResponsesState, index: number): OpenItem;
function openItem<Kind extends OpenItem['kind']>(
  state: OpenAiResponsesState,
  index: number,
  kind: Kind,
): Extract<OpenItem, { kind: Kind }>;
function openItem(state: OpenAiResponsesState, index: number, kind?: OpenItem['kind']): OpenItem {
  if (!state.open || index !== state.started - 1) {
    throw new DialectError('output_index', `output item ${index} is not open`);
  }
  if (kind && state.open.kind !== kind) {
    throw new DialectError('output_index', `output item ${index} is no ${kind} item`);
  }
  return state.open;
}

function typeOf(open: OpenItem): string {
  return open.kind === 'other' ? open.type : open.kind;
}

/** A delta event carrying `text`, or none for empty text (the API sends none). */
function deltas(text: string, event: Record<string, unknown>): Record<string, unknown>[] {
  return text === '' ? [] : [{ ...event, delta: text }];
}

/** The events that would stream a whole response: each part's text in one delta. */
function responseStandIns(whole: z.infer<typeof wholeResponse>, raw: object): StandIn[] {
  const created = { type: 'response.created', response: { ...raw, status: 'in_progress', output: [] } };
  const items = whole.output.flatMap((value, index) => {
    const field = `output[${index}]`;
    return itemStandIns(parseItem(value, field), value, index).map((event) => ({ event, field }));
  });
  const end = { type: `response.${whole.status}`, response: raw };
  return [{ event: created, field: 'object' }, ...items, { event: end, field: 'status' }];
}

function itemStandIns(item: OutputItem, value: Record<string, unknown>, outputIndex: number): unknown[] {
  const at = { output_index: outputIndex };
  const added = (started: Record<string, unknown>) => ({ type: 'response.output_item.added', ...at, item: started });
  const done = { type: 'response.output_item.done', ...at, item: value };
  switch (item.type) {
    case 'message':
      return [
        added({ ...value, content: [] }),
        ...item.content.flatMap((part, index) => {
          const partAt = { ...at, content_index: index };
          const text = part.type === 'output_text' ? part.text : part.refusal;
          const empty = part.type === 'output_text' ? { ...part, text: '', annotations: [] } : { ...part, refusal: '' };
          const deltaType = part.type === 'output_text' ? 'response.output_text.delta' : 'response.refusal.delta';
          return [
            { type: 'response.content_part.added', ...partAt, part: empty },
            ...deltas(text, { type: deltaType, ...partAt }),
            { type: 'response.content_part.done', ...partAt, part },
          ];
        }),
        done,
      ];
    case 'reasoning':
      return [
        added({ ...value, summary: [] }),
        ...item.summary.flatMap((part, index) => [
          { type: 'response.reasoning_summary_part.added', ...at, summary_index: index, part: { ...part, text: '' } },
          ...deltas(part.text, { type: 'response.reasoning_summary_text.delta', ...at, summary_index: index }),
        ]),
        ...(item.content ?? []).flatMap((part, index) => [
          { type: 'response.content_part.added', ...at, content_index: index, part: { ...part, text: '' } },
          ...deltas(part.text, { type: 'response.reasoning_text.delta', ...at, content_index: index }),
        ]),
        done,
      ];
    case 'function_call':
      return [
        added({ ...value, arguments: '' }),
        ...deltas(item.arguments, { type: 'response.function_call_arguments.delta', ...at }),
        done,
      ];
    case 'other':
      return [added(value), done];
  }
}
