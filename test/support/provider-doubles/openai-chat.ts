import { SequenceError, validateChatMessages } from '../chat-completions-server.js';
import {
  bearerKey,
  chunkChars,
  InvalidRequest,
  pieces,
  usageOf,
  type Protocol,
  type RenderContext,
  type StreamEvent,
} from './core.js';
import { openAiErrorBody } from './openai-errors.js';

/**
 * OpenAI Chat Completions, `POST /v1/chat/completions`: `data: {chunk}\n\n` events ending with
 * `data: [DONE]\n\n`, reasoning as `reasoning_content` deltas (as OpenAI-compatible reasoning
 * providers send it), parallel tool calls interleaved by index, the usage chunk when
 * `stream_options.include_usage` asks for it, and a mid-stream error as `data: {"error": {...}}`.
 */
export function openAiChat(): Protocol {
  return {
    name: 'openai-chat',
    path: '/v1/chat/completions',
    requestIdHeader: 'x-request-id',
    keyOf: bearerKey,
    validate,
    render,
    errorBody: openAiErrorBody,
    streamError: (message) => ({ data: openAiErrorBody(500, message) }),
  };
}

function validate(body: any): void {
  if (typeof body?.model !== 'string' || body.model === '')
    throw new InvalidRequest('you must provide a model parameter', 'model');
  try {
    validateChatMessages(body.messages);
  } catch (error) {
    if (error instanceof SequenceError) throw new InvalidRequest(error.message, error.param);
    throw error;
  }
}

function render({ body, answer, nextId, created }: RenderContext) {
  const id = nextId('chatcmpl-');
  const size = chunkChars(answer);
  const calls = answer.toolCalls ?? [];
  const finishReason = calls.length > 0 ? 'tool_calls' : 'stop';
  const annotations = (answer.search?.results ?? []).map((result) => ({
    type: 'url_citation',
    url_citation: { url: result.url, title: result.title, start_index: 0, end_index: (answer.text ?? '').length },
  }));
  const usage = chatUsage(answer);
  const includeUsage = body.stream_options?.include_usage === true;
  const chunk = (choices: unknown[], chunkUsage: unknown = null): StreamEvent => ({
    data: {
      id,
      object: 'chat.completion.chunk',
      created,
      model: body.model,
      service_tier: 'default',
      system_fingerprint: 'fp_double',
      choices,
      ...(includeUsage ? { usage: chunkUsage } : {}),
    },
  });
  const delta = (content: Record<string, unknown>, finish: string | null = null) =>
    chunk([{ index: 0, delta: content, logprobs: null, finish_reason: finish }]);
  const events: StreamEvent[] = [
    delta({ role: 'assistant', content: '', refusal: null }),
    ...pieces(answer.reasoning ?? '', size).map((part) => delta({ reasoning_content: part })),
    ...pieces(answer.text ?? '', size).map((part) => delta({ content: part })),
    ...(annotations.length > 0 ? [delta({ annotations })] : []),
    ...interleavedToolCallDeltas(calls, size).map((toolCall) => delta({ tool_calls: [toolCall] })),
    delta({}, finishReason),
    ...(includeUsage ? [chunk([], usage)] : []),
    { data: '[DONE]' },
  ];
  const message = {
    role: 'assistant',
    content: answer.text ?? (calls.length > 0 ? null : ''),
    refusal: null,
    annotations,
    ...(answer.reasoning === undefined ? {} : { reasoning_content: answer.reasoning }),
    ...(calls.length === 0
      ? {}
      : {
          tool_calls: calls.map((call) => ({
            id: call.id,
            type: 'function',
            function: { name: call.name, arguments: call.arguments },
          })),
        }),
  };
  const completion = {
    id,
    object: 'chat.completion',
    created,
    model: body.model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: finishReason }],
    usage,
    service_tier: 'default',
    system_fingerprint: 'fp_double',
  };
  return { body: completion, events };
}

/** Each call opens with its id and name; then the calls' argument pieces take turns, call by call. */
function interleavedToolCallDeltas(calls: NonNullable<RenderContext['answer']['toolCalls']>, size: number) {
  const openings = calls.map((call, index) => ({
    index,
    id: call.id,
    type: 'function',
    function: { name: call.name, arguments: '' },
  }));
  const argumentPieces = calls.map((call) => pieces(call.arguments, size));
  const rounds = Math.max(0, ...argumentPieces.map((list) => list.length));
  const continuations = Array.from({ length: rounds }, (_, round) =>
    argumentPieces.flatMap((list, index) =>
      round < list.length ? [{ index, function: { arguments: list[round] } }] : [],
    ),
  ).flat();
  return [...openings, ...continuations];
}

function chatUsage(answer: RenderContext['answer']) {
  const usage = usageOf(answer);
  return {
    prompt_tokens: usage.inputTokens,
    completion_tokens: usage.outputTokens,
    total_tokens: usage.inputTokens + usage.outputTokens,
    prompt_tokens_details: { cached_tokens: usage.cachedInputTokens, audio_tokens: 0 },
    completion_tokens_details: {
      reasoning_tokens: usage.reasoningTokens,
      audio_tokens: 0,
      accepted_prediction_tokens: 0,
      rejected_prediction_tokens: 0,
    },
  };
}
