import { z } from 'zod';
import {
  DialectError,
  followedBy,
  grownDelta,
  parseEvent,
  responseEnd,
  toolResponse,
  type Translation,
  type Translator,
  type UnnumberedChunk,
} from './dialect.js';

/**
 * AI SDK UI message stream parts (what `toUIMessageStream()` writes and `useChat` reads) → Cherry
 * chunks. Part names and fields follow `uiMessageChunkSchema` in vercel/ai
 * `packages/ai/src/ui-message-stream/ui-message-chunks.ts` (AI SDK 5 and later). Each step of a
 * multi-step tool loop after the first opens a new round (`llm_response_created`), as Cherry does
 * after every tool round. A stream that finishes while a tool call waits for its output (a tool
 * the client runs, `useChat` with `addToolResult`) ends a tool round: the stream that continues
 * the same message after the client ran it starts over. Sources, files, data parts and metadata
 * are recorded and change no block.
 */
interface OpenPart {
  readonly id: string;
  readonly text: string;
}

interface ToolCall {
  readonly name: string;
  readonly input: string;
  /** `streaming` until its input is available; `done` once its output (or error) is in. */
  readonly stage: 'streaming' | 'available' | 'done';
}

export interface AiSdkUiState {
  /**
   * `failed`: an `error` part came, only `finish-step` and `finish` may follow; `round-ended`: a
   * tool round finished, the stream that continues the message may start.
   */
  readonly phase: 'before' | 'streaming' | 'failed' | 'round-ended' | 'ended';
  readonly finishedSteps: number;
  readonly text: OpenPart | undefined;
  readonly reasoning: OpenPart | undefined;
  /** By tool call id. */
  readonly tools: Readonly<Record<string, ToolCall>>;
}

const id = z.string().min(1);
const toolCallId = z.string().min(1);
const toolName = z.string().min(1);

const uiPart = z.discriminatedUnion('type', [
  z.object({ type: z.literal('start'), messageId: z.string().optional() }).passthrough(),
  z.object({ type: z.literal('start-step') }).passthrough(),
  z.object({ type: z.literal('finish-step') }).passthrough(),
  z.object({ type: z.literal('text-start'), id }).passthrough(),
  z.object({ type: z.literal('text-delta'), id, delta: z.string() }).passthrough(),
  z.object({ type: z.literal('text-end'), id }).passthrough(),
  z.object({ type: z.literal('reasoning-start'), id }).passthrough(),
  z.object({ type: z.literal('reasoning-delta'), id, delta: z.string() }).passthrough(),
  z.object({ type: z.literal('reasoning-end'), id }).passthrough(),
  z.object({ type: z.literal('tool-input-start'), toolCallId, toolName }).passthrough(),
  z.object({ type: z.literal('tool-input-delta'), toolCallId, inputTextDelta: z.string() }).passthrough(),
  z.object({ type: z.literal('tool-input-available'), toolCallId, toolName, input: z.unknown() }).passthrough(),
  z
    .object({ type: z.literal('tool-input-error'), toolCallId, toolName, input: z.unknown(), errorText: z.string() })
    .passthrough(),
  z.object({ type: z.literal('tool-approval-request'), approvalId: z.string(), toolCallId }).passthrough(),
  z
    .object({
      type: z.literal('tool-output-available'),
      toolCallId,
      output: z.unknown(),
      preliminary: z.boolean().optional(),
    })
    .passthrough(),
  z.object({ type: z.literal('tool-output-error'), toolCallId, errorText: z.string() }).passthrough(),
  z.object({ type: z.literal('tool-output-denied'), toolCallId }).passthrough(),
  z.object({ type: z.literal('source-url'), sourceId: z.string(), url: z.string() }).passthrough(),
  z
    .object({ type: z.literal('source-document'), sourceId: z.string(), mediaType: z.string(), title: z.string() })
    .passthrough(),
  z.object({ type: z.literal('file'), url: z.string(), mediaType: z.string() }).passthrough(),
  z.object({ type: z.literal('message-metadata'), messageMetadata: z.unknown() }).passthrough(),
  z.object({ type: z.literal('finish'), finishReason: z.string().optional() }).passthrough(),
  z.object({ type: z.literal('error'), errorText: z.string() }).passthrough(),
  z.object({ type: z.literal('abort'), reason: z.string().optional() }).passthrough(),
]);
/** `data-<name>` parts carry the application's own data. */
const dataPart = z.object({ type: z.string().startsWith('data-'), data: z.unknown() }).passthrough();

type UiPart = z.infer<typeof uiPart> | { readonly type: 'data' };

function parsePart(event: unknown): UiPart {
  const type = (event as { type?: unknown } | null)?.type;
  if (typeof type !== 'string' || !type.startsWith('data-')) return parseEvent(uiPart, event);
  parseEvent(dataPart, event);
  return { type: 'data' };
}
type Step = Translation<AiSdkUiState>;
const nothing = (state: AiSdkUiState): Step => ({ state, chunks: [] });

export const aiSdkUiTranslator: Translator<AiSdkUiState> = {
  initial: { phase: 'before', finishedSteps: 0, text: undefined, reasoning: undefined, tools: {} },
  translate(current, event) {
    const part = parsePart(event);
    if (current.phase === 'ended') throw new DialectError('type', 'the stream has already ended');
    // After a tool round, the stream that continues the message starts over.
    const state = current.phase === 'round-ended' ? aiSdkUiTranslator.initial : current;
    if (state.phase === 'failed') {
      if (part.type === 'finish-step' || part.type === 'finish') {
        return nothing({ ...state, phase: part.type === 'finish' ? 'ended' : 'failed' });
      }
      throw new DialectError('type', `${part.type} after an error part; only finish-step and finish may follow`);
    }
    if (part.type === 'start') {
      if (state.phase !== 'before') throw new DialectError('type', 'start comes once, first');
      return { state: { ...state, phase: 'streaming' }, chunks: [{ type: 'llm_response_created' }] };
    }
    const inStream = part;
    return afterStart(state, (started) => translatePart(started, inStream));
  },
};

/** A stream written with `sendStart: false` starts at its first part. */
function afterStart(state: AiSdkUiState, translate: (state: AiSdkUiState) => Step): Step {
  if (state.phase !== 'before') return translate(state);
  return followedBy(
    { state: { ...state, phase: 'streaming' }, chunks: [{ type: 'llm_response_created' }] },
    translate({ ...state, phase: 'streaming' }),
  );
}

function translatePart(state: AiSdkUiState, part: Exclude<UiPart, { type: 'start' }>): Step {
  switch (part.type) {
    case 'start-step':
      return state.finishedSteps > 0 ? { state, chunks: [{ type: 'llm_response_created' }] } : nothing(state);
    case 'finish-step':
      return nothing({ ...state, finishedSteps: state.finishedSteps + 1 });
    case 'text-start':
    case 'reasoning-start': {
      const kind = part.type === 'text-start' ? 'text' : 'reasoning';
      const open = state[kind];
      if (open) throw new DialectError('id', `${kind} part ${open.id} is still open`);
      const start: UnnumberedChunk = kind === 'text' ? { type: 'text.start' } : { type: 'thinking.start' };
      return { state: { ...state, [kind]: { id: part.id, text: '' } }, chunks: [start] };
    }
    case 'text-delta':
    case 'reasoning-delta': {
      const kind = part.type === 'text-delta' ? 'text' : 'reasoning';
      const delta = grownDelta(
        kind === 'text' ? 'text.delta' : 'thinking.delta',
        openPart(state, kind, part.id).text,
        part.delta,
      );
      return { state: { ...state, [kind]: { id: part.id, text: delta.text } }, chunks: [delta] };
    }
    case 'text-end':
    case 'reasoning-end': {
      const kind = part.type === 'text-end' ? 'text' : 'reasoning';
      const { text } = openPart(state, kind, part.id);
      return {
        state: { ...state, [kind]: undefined },
        chunks: [{ type: kind === 'text' ? 'text.complete' : 'thinking.complete', text }],
      };
    }
    case 'tool-input-start': {
      if (Object.hasOwn(state.tools, part.toolCallId)) {
        throw new DialectError('toolCallId', `tool call ${part.toolCallId} has already started`);
      }
      const response = toolResponse(part.toolCallId, part.toolName, 'streaming', { partialArguments: '' });
      return {
        state: withTool(state, part.toolCallId, { name: part.toolName, input: '', stage: 'streaming' }),
        chunks: [{ type: 'mcp_tool_streaming', responses: [response] }],
      };
    }
    case 'tool-input-delta': {
      const tool = toolIn(state, part.toolCallId, 'streaming');
      const input = tool.input + part.inputTextDelta;
      const response = toolResponse(part.toolCallId, tool.name, 'streaming', { partialArguments: input });
      return {
        state: withTool(state, part.toolCallId, { ...tool, input }),
        chunks: [{ type: 'mcp_tool_streaming', responses: [response], grownBy: part.inputTextDelta }],
      };
    }
    case 'tool-input-available':
    case 'tool-input-error': {
      if (Object.hasOwn(state.tools, part.toolCallId)) toolIn(state, part.toolCallId, 'streaming');
      const failed = part.type === 'tool-input-error';
      const tool: ToolCall = { name: part.toolName, input: '', stage: failed ? 'done' : 'available' };
      const chunks: UnnumberedChunk[] = [
        {
          type: 'mcp_tool_pending',
          responses: [toolResponse(part.toolCallId, part.toolName, 'pending', { arguments: part.input })],
        },
      ];
      if (part.type === 'tool-input-error') {
        const response = toolResponse(part.toolCallId, part.toolName, 'error', {
          arguments: part.input,
          response: part.errorText,
        });
        chunks.push({ type: 'mcp_tool_complete', responses: [response] });
      }
      return { state: withTool(state, part.toolCallId, tool), chunks };
    }
    case 'tool-approval-request':
      toolIn(state, part.toolCallId, 'available');
      return nothing(state);
    case 'tool-output-available':
    case 'tool-output-error':
    case 'tool-output-denied':
      return completeTool(state, part);
    case 'data':
    case 'source-url':
    case 'source-document':
    case 'file':
    case 'message-metadata':
      return nothing(state);
    case 'finish': {
      const open = state.text ?? state.reasoning;
      if (open) throw new DialectError('type', `finish while part ${open.id} is still open`);
      const streaming = Object.entries(state.tools).find(([, tool]) => tool.stage === 'streaming');
      if (streaming) {
        throw new DialectError('type', `finish while the input of tool call ${streaming[0]} never became available`);
      }
      const response = part.finishReason === undefined ? {} : { finishReason: part.finishReason };
      const toolRound = Object.values(state.tools).some((tool) => tool.stage === 'available');
      return {
        state: { ...state, phase: toolRound ? 'round-ended' : 'ended' },
        chunks: [responseEnd(toolRound, response)],
      };
    }
    case 'error':
      return { state: { ...state, phase: 'failed' }, chunks: [{ type: 'error', error: { message: part.errorText } }] };
    case 'abort': {
      const error = { name: 'AbortError', message: part.reason ?? 'the stream was aborted' };
      return { state: { ...state, phase: 'ended' }, chunks: [{ type: 'error', error }] };
    }
  }
}

function completeTool(
  state: AiSdkUiState,
  part: Extract<UiPart, { type: 'tool-output-available' | 'tool-output-error' | 'tool-output-denied' }>,
): Step {
  const tool = toolIn(state, part.toolCallId, 'available');
  if (part.type === 'tool-output-available' && part.preliminary) {
    const response = toolResponse(part.toolCallId, tool.name, 'invoking', { response: part.output });
    return { state, chunks: [{ type: 'mcp_tool_in_progress', responses: [response] }] };
  }
  const response =
    part.type === 'tool-output-available'
      ? toolResponse(part.toolCallId, tool.name, 'done', { response: part.output })
      : part.type === 'tool-output-error'
        ? toolResponse(part.toolCallId, tool.name, 'error', { response: part.errorText })
        : toolResponse(part.toolCallId, tool.name, 'cancelled');
  return {
    state: withTool(state, part.toolCallId, { ...tool, stage: 'done' }),
    chunks: [{ type: 'mcp_tool_complete', responses: [response] }],
  };
}

function openPart(state: AiSdkUiState, kind: 'text' | 'reasoning', partId: string): OpenPart {
  const open = state[kind];
  if (open?.id !== partId) throw new DialectError('id', `${kind} part ${partId} is not open`);
  return open;
}

function toolIn(state: AiSdkUiState, callId: string, stage: ToolCall['stage']): ToolCall {
  const tool = Object.hasOwn(state.tools, callId) ? state.tools[callId] : undefined;
  if (!tool) throw new DialectError('toolCallId', `tool call ${callId} has not started`);
  if (tool.stage !== stage) throw new DialectError('toolCallId', `tool call ${callId} is ${STAGE_NAMES[tool.stage]}`);
  return tool;
}

const STAGE_NAMES = {
  streaming: 'still streaming its input',
  available: 'waiting for its output',
  done: 'already complete',
};

function withTool(state: AiSdkUiState, callId: string, tool: ToolCall): AiSdkUiState {
  return { ...state, tools: { ...state.tools, [callId]: tool } };
}
