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
  type UnnumberedChunk,
} from './dialect.js';

/**
 * OpenAI Chat Completions streaming (`chat.completion.chunk` objects, the `data:` payloads of the
 * SSE stream, `[DONE]` included) → Cherry chunks. One choice (n=1) is recorded. Reasoning comes
 * as `delta.reasoning_content` (DeepSeek, vLLM, many compatible servers), text as `delta.content`,
 * tool calls as `delta.tool_calls` whose `function.arguments` stream in pieces per `index`.
 * The response ends at the first chunk carrying `usage` after a `finish_reason`
 * (`stream_options.include_usage`), or at `[DONE]`. A response with tool calls ends a tool round:
 * the next call's stream (or whole `chat.completion`) starts over in the same message. A whole
 * `chat.completion` (a call without `stream`) is translated as the chunks that would stream it.
 */
interface OpenAiTool {
  readonly id: string;
  readonly name: string;
  readonly arguments: string;
}

export interface OpenAiChatState {
  /**
   * `finished`: a choice finished, usage may follow; `round-ended`: a tool round ended, the next
   * round may start; `ended`: nothing but `[DONE]` may follow.
   */
  readonly phase: 'before' | 'streaming' | 'finished' | 'round-ended' | 'ended';
  /** The open text part's accumulated text. */
  readonly text: string | undefined;
  readonly reasoning: string | undefined;
  /** By `index`. */
  readonly tools: readonly OpenAiTool[];
  readonly finishReason: string | null;
}

const toolCallDelta = z
  .object({
    index: z.number().int().nonnegative(),
    id: z.string().min(1).optional(),
    type: z.literal('function').optional(),
    function: z
      .object({ name: z.string().min(1).optional(), arguments: z.string().optional() })
      .passthrough()
      .optional(),
  })
  .passthrough();

/** What a chunk's `delta` streams and a whole response's `message` holds. */
const messageText = {
  content: z.string().nullish(),
  refusal: z.string().nullish(),
  reasoning_content: z.string().nullish(),
};

const completionChunk = z
  .object({
    object: z.literal('chat.completion.chunk'),
    choices: z.array(
      z
        .object({
          index: z.number().int().nonnegative(),
          delta: z
            .object({ ...messageText, tool_calls: z.array(toolCallDelta).nullish() })
            .passthrough()
            .optional(),
          finish_reason: z.string().nullish(),
        })
        .passthrough(),
    ),
    usage: z.object({}).passthrough().nullish(),
  })
  .passthrough();

const streamError = z
  .object({
    error: z
      .object({ message: z.string(), type: z.string().nullish(), code: z.union([z.string(), z.number()]).nullish() })
      .passthrough(),
  })
  .passthrough();

/** A whole (non-streaming) response: `choices[0].message` holds what the chunks' deltas would. */
const completion = z
  .object({
    object: z.literal('chat.completion'),
    choices: z
      .array(
        z
          .object({
            index: z.number().int().nonnegative(),
            message: z
              .object({
                ...messageText,
                tool_calls: z
                  .array(
                    z
                      .object({
                        id: z.string().min(1),
                        type: z.literal('function').optional(),
                        function: z.object({ name: z.string().min(1), arguments: z.string() }).passthrough(),
                      })
                      .passthrough(),
                  )
                  .nullish(),
              })
              .passthrough(),
            finish_reason: z.string().nullish(),
          })
          .passthrough(),
      )
      .length(1, 'holds one choice: only n=1 is recorded'),
    usage: z.object({}).passthrough().nullish(),
  })
  .passthrough();

type CompletionChunk = z.infer<typeof completionChunk>;
type Step = Translation<OpenAiChatState>;

export const openAiChatTranslator: Translator<OpenAiChatState> = {
  initial: { phase: 'before', text: undefined, reasoning: undefined, tools: [], finishReason: null },
  translate(state, event) {
    if (event === '[DONE]') return streamDone(state);
    if (typeof event !== 'object' || event === null || Array.isArray(event)) {
      throw new DialectError('', 'must be a chat.completion(.chunk) object, an error object or "[DONE]"');
    }
    if (state.phase === 'ended') throw new DialectError('', 'the stream has already ended');
    // After a tool round, the next call's response starts over.
    const round = state.phase === 'round-ended' ? openAiChatTranslator.initial : state;
    if ('error' in event && !('object' in event)) {
      const { error } = parseEvent(streamError, event);
      const failure = {
        name: error.type ?? 'APIError',
        message: error.message,
        ...(error.code == null ? {} : { code: error.code }),
      };
      return { state: { ...round, phase: 'ended' }, chunks: [{ type: 'error', error: failure }] };
    }
    if ((event as { object?: unknown }).object === 'chat.completion') {
      const whole = parseEvent(completion, event);
      if (round.phase !== 'before') throw new DialectError('object', 'a whole chat.completion comes before any chunk');
      return translateStandIns(openAiChatTranslator, round, completionStandIns(whole));
    }
    return translateChunk(round, parseEvent(completionChunk, event));
  },
};

/** The chunks that would stream a whole response: one delta per part, then the finish with the usage. */
function completionStandIns({ choices: [choice], usage }: z.infer<typeof completion>): StandIn[] {
  const { message, finish_reason: finishReason } = choice;
  const chunk = (delta: Record<string, unknown>, finishReason: string | null = null) => ({
    object: 'chat.completion.chunk',
    choices: [{ index: 0, delta, finish_reason: finishReason }],
  });
  const field = 'choices[0].message';
  const parts: StandIn[] = [{ event: chunk({ role: 'assistant' }), field }];
  if (message.reasoning_content) parts.push({ event: chunk({ reasoning_content: message.reasoning_content }), field });
  if (message.content || message.refusal) {
    parts.push({ event: chunk({ content: message.content, refusal: message.refusal }), field: `${field}.content` });
  }
  (message.tool_calls ?? []).forEach((call, index) => {
    const delta = { tool_calls: [{ index, id: call.id, type: 'function', function: call.function }] };
    parts.push({ event: chunk(delta), field: `${field}.tool_calls[${index}]` });
  });
  const end = 'choices[0].finish_reason';
  return [
    ...parts,
    { event: { ...chunk({}, finishReason ?? null), usage }, field: end },
    { event: '[DONE]', field: end },
  ];
}

function translateChunk(initial: OpenAiChatState, event: CompletionChunk): Step {
  let step: Step = { state: initial, chunks: [] };
  if (initial.phase === 'before') {
    step = { state: { ...initial, phase: 'streaming' }, chunks: [{ type: 'llm_response_created' }] };
  }
  const [choice, extra] = event.choices;
  if (extra) throw new DialectError('choices[1]', 'only one choice (n=1) is recorded');
  if (choice) {
    if (choice.index !== 0) throw new DialectError('choices[0].index', 'only choice 0 (n=1) is recorded');
    const delta = choice.delta ?? {};
    const carriesContent = Boolean(
      delta.reasoning_content || delta.content || delta.refusal || delta.tool_calls?.length,
    );
    if (carriesContent && step.state.phase !== 'streaming') {
      throw new DialectError('choices[0].delta', 'comes after the choice finished');
    }
    if (delta.reasoning_content) step = followedBy(step, streamReasoning(step.state, delta.reasoning_content));
    const text = (delta.content ?? '') + (delta.refusal ?? '');
    if (text) step = followedBy(step, streamText(step.state, text));
    (delta.tool_calls ?? []).forEach((call, index) => {
      step = followedBy(step, streamToolCall(step.state, call, `choices[0].delta.tool_calls[${index}]`));
    });
    if (choice.finish_reason) {
      if (step.state.phase !== 'streaming') {
        throw new DialectError('choices[0].finish_reason', 'the choice has already finished');
      }
      step = followedBy(step, finish(step.state, choice.finish_reason, 'choices[0].finish_reason'));
    }
  }
  if (event.usage && step.state.phase === 'finished') step = followedBy(step, complete(step.state, event.usage));
  return step;
}

function streamReasoning(state: OpenAiChatState, piece: string): Step {
  const delta = grownDelta('thinking.delta', state.reasoning ?? '', piece);
  const start: UnnumberedChunk[] = state.reasoning === undefined ? [{ type: 'thinking.start' }] : [];
  return { state: { ...state, reasoning: delta.text }, chunks: [...start, delta] };
}

/** Answer text ends the reasoning before it. */
function streamText(state: OpenAiChatState, piece: string): Step {
  const closed = closeReasoning(state);
  const delta = grownDelta('text.delta', state.text ?? '', piece);
  const start: UnnumberedChunk[] = state.text === undefined ? [{ type: 'text.start' }] : [];
  return followedBy(closed, { state: { ...closed.state, text: delta.text }, chunks: [...start, delta] });
}

/** A call's first delta names it (`id`, `function.name`); later ones at the same `index` add argument text. */
function streamToolCall(state: OpenAiChatState, call: z.infer<typeof toolCallDelta>, field: string): Step {
  const closed: Step = state.tools.length === 0 ? closeParts(state) : { state, chunks: [] };
  const tools = closed.state.tools;
  const known = tools[call.index];
  if (!known && call.index !== tools.length) {
    throw new DialectError(`${field}.index`, `tool call ${call.index} starts before tool call ${tools.length}`);
  }
  if (!known && !call.id) throw new DialectError(`${field}.id`, 'the first delta of a tool call carries its id');
  if (!known && !call.function?.name) {
    throw new DialectError(`${field}.function.name`, 'the first delta of a tool call carries its name');
  }
  if (known && call.id && call.id !== known.id) {
    throw new DialectError(`${field}.id`, `tool call ${call.index} is ${known.id}, not ${call.id}`);
  }
  const tool: OpenAiTool = known
    ? { ...known, arguments: known.arguments + (call.function?.arguments ?? '') }
    : { id: call.id!, name: call.function!.name!, arguments: call.function?.arguments ?? '' };
  const next = tools.map((existing, index) => (index === call.index ? tool : existing));
  const response = toolResponse(tool.id, tool.name, 'streaming', { partialArguments: tool.arguments });
  return followedBy(closed, {
    state: { ...closed.state, tools: known ? next : [...tools, tool] },
    chunks: [{ type: 'mcp_tool_streaming', responses: [response], grownBy: call.function?.arguments ?? '' }],
  });
}

/**
 * The choice finished: parts close, and every tool call's arguments must now be a complete JSON
 * object; `field` is the event's field that ended the choice, named when one is not.
 */
function finish(state: OpenAiChatState, finishReason: string | null, field: string): Step {
  const closed = closeParts(state);
  const responses = closed.state.tools.map((tool, index) => {
    const args = completeArguments(tool.arguments);
    if (!args) {
      throw new DialectError(
        field,
        `the arguments of tool call ${index} (${tool.id}) never became a complete JSON object`,
      );
    }
    return toolResponse(tool.id, tool.name, 'pending', { arguments: args });
  });
  const pending: UnnumberedChunk[] = responses.length > 0 ? [{ type: 'mcp_tool_pending', responses }] : [];
  return followedBy(closed, { state: { ...closed.state, phase: 'finished', finishReason }, chunks: pending });
}

function complete(state: OpenAiChatState, usage: unknown): Step {
  const response = { finish_reason: state.finishReason, ...(usage === undefined ? {} : { usage }) };
  const toolRound = state.tools.length > 0 || state.finishReason === 'tool_calls';
  return {
    state: { ...state, phase: toolRound ? 'round-ended' : 'ended' },
    chunks: [responseEnd(toolRound, response)],
  };
}

function streamDone(state: OpenAiChatState): Step {
  if (state.phase === 'ended' || state.phase === 'round-ended') return { state, chunks: [] };
  if (state.phase === 'before') throw new DialectError('', 'the stream ended before any chunk');
  const finished = state.phase === 'finished' ? { state, chunks: [] } : finish(state, null, '');
  return followedBy(finished, complete(finished.state, undefined));
}

function closeReasoning(state: OpenAiChatState): Step {
  if (state.reasoning === undefined) return { state, chunks: [] };
  return { state: { ...state, reasoning: undefined }, chunks: [{ type: 'thinking.complete', text: state.reasoning }] };
}

function closeText(state: OpenAiChatState): Step {
  if (state.text === undefined) return { state, chunks: [] };
  return { state: { ...state, text: undefined }, chunks: [{ type: 'text.complete', text: state.text }] };
}

function closeParts(state: OpenAiChatState): Step {
  const reasoning = closeReasoning(state);
  return followedBy(reasoning, closeText(reasoning.state));
}
