import { z } from 'zod';
import {
  completeArguments,
  DialectError,
  followedBy,
  grownDelta,
  parseEvent,
  responseEnd,
  type StandIn,
  toolResponse,
  translateStandIns,
  type Translation,
  type Translator,
} from './dialect.js';

/**
 * Anthropic Messages streaming (the `data:` payloads of the SSE stream) → Cherry chunks.
 * Content blocks stream one after another by `index`: `text`, `thinking` (its `signature_delta`
 * is kept on `thinking.complete`, so the history can send it back), `redacted_thinking` (an
 * empty thinking block keeping the provider's block as `item`, to send back too) and `tool_use`
 * (its `input_json_delta` pieces must form a JSON object by `content_block_stop`). `message_stop`
 * ends the response with the stop reason and usage that `message_start` and `message_delta`
 * reported; a `tool_use` stop ends a tool round, and the next call's `message_start` starts over
 * in the same message. A whole `message` (a call without `stream`) is translated as the events
 * that would stream it.
 */
type ContentBlock =
  | { readonly kind: 'text'; readonly text: string }
  | { readonly kind: 'thinking'; readonly text: string; readonly signature: string | undefined }
  | { readonly kind: 'tool_use'; readonly id: string; readonly name: string; readonly json: string }
  | { readonly kind: 'redacted_thinking'; readonly item: Readonly<Record<string, unknown>> };

export interface AnthropicMessagesState {
  /** `round-ended`: a tool round ended, the next round may start. */
  readonly phase: 'before' | 'streaming' | 'stopping' | 'round-ended' | 'ended';
  /** How many content blocks have started; the open one, if any, is the last. */
  readonly started: number;
  readonly open: ContentBlock | undefined;
  readonly stopReason: string | null;
  readonly usage: Readonly<Record<string, unknown>>;
}

const usage = z.object({}).passthrough();
const index = z.number().int().nonnegative();

const contentBlock = z.discriminatedUnion('type', [
  z.object({ type: z.literal('text'), text: z.string() }).passthrough(),
  z.object({ type: z.literal('thinking'), thinking: z.string(), signature: z.string().optional() }).passthrough(),
  z.object({ type: z.literal('redacted_thinking'), data: z.string() }).passthrough(),
  z
    .object({
      type: z.literal('tool_use'),
      id: z.string().min(1),
      name: z.string().min(1),
      input: z.object({}).passthrough(),
    })
    .passthrough(),
]);

const blockDelta = z.discriminatedUnion('type', [
  z.object({ type: z.literal('text_delta'), text: z.string() }).passthrough(),
  z.object({ type: z.literal('thinking_delta'), thinking: z.string() }).passthrough(),
  z.object({ type: z.literal('signature_delta'), signature: z.string() }).passthrough(),
  z.object({ type: z.literal('input_json_delta'), partial_json: z.string() }).passthrough(),
]);

const streamEvent = z.discriminatedUnion('type', [
  z
    .object({
      type: z.literal('message'),
      content: z.array(contentBlock),
      stop_reason: z.string().nullish(),
      usage: usage.optional(),
    })
    .passthrough(),
  z
    .object({ type: z.literal('message_start'), message: z.object({ usage: usage.optional() }).passthrough() })
    .passthrough(),
  z.object({ type: z.literal('content_block_start'), index, content_block: contentBlock }).passthrough(),
  z.object({ type: z.literal('content_block_delta'), index, delta: blockDelta }).passthrough(),
  z.object({ type: z.literal('content_block_stop'), index }).passthrough(),
  z
    .object({
      type: z.literal('message_delta'),
      delta: z.object({ stop_reason: z.string().nullish() }).passthrough(),
      usage: usage.optional(),
    })
    .passthrough(),
  z.object({ type: z.literal('message_stop') }).passthrough(),
  z.object({ type: z.literal('ping') }).passthrough(),
  z
    .object({ type: z.literal('error'), error: z.object({ type: z.string(), message: z.string() }).passthrough() })
    .passthrough(),
]);

type StreamEvent = z.infer<typeof streamEvent>;
type Step = Translation<AnthropicMessagesState>;

/** Which delta each block kind takes. */
const DELTA_OF = {
  text: ['text_delta'],
  thinking: ['thinking_delta', 'signature_delta'],
  tool_use: ['input_json_delta'],
  redacted_thinking: [],
};

export const anthropicMessagesTranslator: Translator<AnthropicMessagesState> = {
  initial: { phase: 'before', started: 0, open: undefined, stopReason: null, usage: {} },
  translate(state, raw) {
    const event = parseEvent(streamEvent, raw);
    if (event.type === 'ping') return { state, chunks: [] };
    if (state.phase === 'ended') throw new DialectError('type', 'the stream has already ended');
    // After a tool round, the next call's response starts over.
    const round = state.phase === 'round-ended' ? anthropicMessagesTranslator.initial : state;
    if (event.type === 'error') {
      const failure = { name: event.error.type, message: event.error.message };
      return { state: { ...round, phase: 'ended', open: undefined }, chunks: [{ type: 'error', error: failure }] };
    }
    if (event.type === 'message' || event.type === 'message_start') {
      if (round.phase !== 'before') throw new DialectError('type', `${event.type} comes once, first`);
    }
    if (event.type === 'message') return translateStandIns(anthropicMessagesTranslator, round, messageStandIns(event));
    if (event.type === 'message_start') {
      return {
        state: { ...round, phase: 'streaming', usage: { ...event.message.usage } },
        chunks: [{ type: 'llm_response_created' }],
      };
    }
    if (round.phase === 'before') throw new DialectError('type', `${event.type} before message_start`);
    return translateInMessage(round, event);
  },
};

/** The events that would stream a whole message: each block whole at its start, a tool's input as one delta. */
function messageStandIns(message: Extract<StreamEvent, { type: 'message' }>): StandIn[] {
  const blocks = message.content.flatMap((block, index): StandIn[] => {
    const field = `content[${index}]`;
    if (block.type !== 'tool_use') {
      return [
        { event: { type: 'content_block_start', index, content_block: block }, field },
        { event: { type: 'content_block_stop', index }, field },
      ];
    }
    const delta = { type: 'input_json_delta', partial_json: JSON.stringify(block.input) };
    return [
      { event: { type: 'content_block_start', index, content_block: { ...block, input: {} } }, field },
      { event: { type: 'content_block_delta', index, delta }, field: `${field}.input` },
      { event: { type: 'content_block_stop', index }, field },
    ];
  });
  return [
    { event: { type: 'message_start', message: { usage: message.usage } }, field: 'type' },
    ...blocks,
    { event: { type: 'message_delta', delta: { stop_reason: message.stop_reason } }, field: 'stop_reason' },
    { event: { type: 'message_stop' }, field: 'stop_reason' },
  ];
}

function translateInMessage(
  state: AnthropicMessagesState,
  event: Exclude<StreamEvent, { type: 'ping' | 'error' | 'message_start' | 'message' }>,
): Step {
  switch (event.type) {
    case 'content_block_start':
      return startBlock(state, event);
    case 'content_block_delta':
      return streamDelta(state, event);
    case 'content_block_stop':
      return stopBlock(state, event.index);
    case 'message_delta': {
      if (state.open) {
        throw new DialectError('type', `message_delta while content block ${state.started - 1} is still open`);
      }
      if (state.phase !== 'streaming') {
        throw new DialectError('type', 'message_delta comes once, after the content blocks');
      }
      const stopReason = event.delta.stop_reason ?? null;
      return {
        state: { ...state, phase: 'stopping', stopReason, usage: { ...state.usage, ...event.usage } },
        chunks: [],
      };
    }
    case 'message_stop': {
      if (state.open) {
        throw new DialectError('type', `message_stop while content block ${state.started - 1} is still open`);
      }
      const response = { stop_reason: state.stopReason, usage: state.usage };
      const toolRound = state.stopReason === 'tool_use';
      return {
        state: { ...state, phase: toolRound ? 'round-ended' : 'ended' },
        chunks: [responseEnd(toolRound, response)],
      };
    }
  }
}

function startBlock(state: AnthropicMessagesState, event: Extract<StreamEvent, { type: 'content_block_start' }>): Step {
  if (state.phase !== 'streaming') throw new DialectError('type', 'content blocks come before message_delta');
  if (state.open) throw new DialectError('index', `content block ${state.started - 1} is still open`);
  if (event.index !== state.started) {
    throw new DialectError('index', `expected content block ${state.started}, got ${event.index}`);
  }
  const block = event.content_block;
  const next = { ...state, started: state.started + 1 };
  switch (block.type) {
    case 'text': {
      const start: Step = { state: { ...next, open: { kind: 'text', text: '' } }, chunks: [{ type: 'text.start' }] };
      return block.text === '' ? start : followedBy(start, appendText(start.state, block.text));
    }
    case 'thinking': {
      const open = { kind: 'thinking' as const, text: '', signature: block.signature || undefined };
      const start: Step = { state: { ...next, open }, chunks: [{ type: 'thinking.start' }] };
      return block.thinking === '' ? start : followedBy(start, appendThinking(start.state, block.thinking));
    }
    case 'redacted_thinking':
      return {
        state: { ...next, open: { kind: 'redacted_thinking', item: block } },
        chunks: [{ type: 'thinking.start' }],
      };
    case 'tool_use': {
      const response = toolResponse(block.id, block.name, 'streaming', { partialArguments: '' });
      const open = { kind: 'tool_use' as const, id: block.id, name: block.name, json: '' };
      return { state: { ...next, open }, chunks: [{ type: 'mcp_tool_streaming', responses: [response] }] };
    }
  }
}

function streamDelta(
  state: AnthropicMessagesState,
  event: Extract<StreamEvent, { type: 'content_block_delta' }>,
): Step {
  const open = openBlock(state, event.index);
  const { delta } = event;
  if (!(DELTA_OF[open.kind] as string[]).includes(delta.type)) {
    throw new DialectError('delta.type', `a ${open.kind} block takes no ${delta.type}`);
  }
  switch (delta.type) {
    case 'text_delta':
      return appendText(state, delta.text);
    case 'thinking_delta':
      return appendThinking(state, delta.thinking);
    case 'signature_delta':
      return {
        state: {
          ...state,
          open: { ...(open as Extract<ContentBlock, { kind: 'thinking' }>), signature: delta.signature },
        },
        chunks: [],
      };
    case 'input_json_delta': {
      const tool = open as Extract<ContentBlock, { kind: 'tool_use' }>;
      const json = tool.json + delta.partial_json;
      const response = toolResponse(tool.id, tool.name, 'streaming', { partialArguments: json });
      return {
        state: { ...state, open: { ...tool, json } },
        chunks: [{ type: 'mcp_tool_streaming', responses: [response], grownBy: delta.partial_json }],
      };
    }
  }
}

function stopBlock(state: AnthropicMessagesState, index: number): Step {
  const open = openBlock(state, index);
  const closed = { ...state, open: undefined };
  switch (open.kind) {
    case 'text':
      return { state: closed, chunks: [{ type: 'text.complete', text: open.text }] };
    case 'thinking':
      return {
        state: closed,
        chunks: [
          { type: 'thinking.complete', text: open.text, ...(open.signature ? { signature: open.signature } : {}) },
        ],
      };
    case 'redacted_thinking':
      return { state: closed, chunks: [{ type: 'thinking.complete', text: '', item: open.item }] };
    case 'tool_use': {
      const args = completeArguments(open.json);
      if (!args) {
        throw new DialectError(
          'index',
          `the input_json_delta pieces of tool_use ${open.id} never became a complete JSON object`,
        );
      }
      return {
        state: closed,
        chunks: [
          { type: 'mcp_tool_pending', responses: [toolResponse(open.id, open.name, 'pending', { arguments: args })] },
        ],
      };
    }
  }
}

function openBlock(state: AnthropicMessagesState, index: number): ContentBlock {
  if (!state.open || index !== state.started - 1) throw new DialectError('index', `content block ${index} is not open`);
  return state.open;
}

function appendText(state: AnthropicMessagesState, piece: string): Step {
  const open = state.open as Extract<ContentBlock, { kind: 'text' }>;
  const delta = grownDelta('text.delta', open.text, piece);
  return { state: { ...state, open: { ...open, text: delta.text } }, chunks: [delta] };
}

function appendThinking(state: AnthropicMessagesState, piece: string): Step {
  const open = state.open as Extract<ContentBlock, { kind: 'thinking' }>;
  const delta = grownDelta('thinking.delta', open.text, piece);
  return { state: { ...state, open: { ...open, text: delta.text } }, chunks: [delta] };
}
