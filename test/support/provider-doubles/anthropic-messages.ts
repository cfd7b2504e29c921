import type { IncomingHttpHeaders } from 'node:http';
import {
  asArray,
  bearerKey,
  chunkChars,
  InvalidRequest,
  pieces,
  sign,
  usageOf,
  type AnswerReply,
  type Protocol,
  type RenderContext,
  type StreamEvent,
} from './core.js';

/**
 * Anthropic Messages, `POST /v1/messages` (`x-api-key` or bearer key, `anthropic-version` required):
 * `event: <type>\ndata: {...}\n\n` events from `message_start` to `message_stop`, one content block
 * after another (thinking with its `signature`, web search, text with citations, tool_use with
 * streamed `input_json_delta`), a mid-stream failure as an `error` event. Thinking signatures are an
 * HMAC of the thinking text, so any double can check a signature a double issued.
 */
export function anthropicMessages(): Protocol {
  return {
    name: 'anthropic-messages',
    path: '/v1/messages',
    requestIdHeader: 'request-id',
    // `x-api-key`, or a bearer token: @anthropic-ai/sdk 1.x sends its apiKey as `Authorization: Bearer`.
    keyOf: (headers) => (typeof headers['x-api-key'] === 'string' ? headers['x-api-key'] : bearerKey(headers)),
    validate,
    render,
    errorBody: anthropicErrorBody,
    streamError: (message) => ({ event: 'error', data: anthropicErrorBody(500, message) }),
  };
}

const ERROR_TYPES: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  429: 'rate_limit_error',
  500: 'api_error',
  503: 'overloaded_error',
};

function anthropicErrorBody(status: number, message: string) {
  return { type: 'error', error: { type: ERROR_TYPES[status] ?? 'api_error', message } };
}

function thinkingSignature(thinking: string): string {
  return sign('thinking', thinking);
}

const THINKING_FIRST =
  'When `thinking` is enabled, a final `assistant` message must start with a thinking block ' +
  '(preceeding the lastmost set of ' +
  '`tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid this ' +
  'requirement, disable `thinking`.';

function validate(body: any, headers: IncomingHttpHeaders): void {
  if (!headers['anthropic-version']) throw new InvalidRequest('anthropic-version: header is required');
  if (typeof body?.model !== 'string' || body.model === '') throw new InvalidRequest('model: Field required', 'model');
  if (typeof body.max_tokens !== 'number') throw new InvalidRequest('max_tokens: Field required', 'max_tokens');
  const messages = body.messages;
  if (!Array.isArray(messages) || messages.length === 0)
    throw new InvalidRequest('messages: at least one message is required', 'messages');
  messages.forEach((message: any, index: number) => {
    if (message?.role !== 'user' && message?.role !== 'assistant') {
      throw new InvalidRequest(
        `messages.${index}.role: Input should be 'user' or 'assistant'`,
        `messages.${index}.role`,
      );
    }
    if (index === 0 && message.role !== 'user')
      throw new InvalidRequest('messages: first message must use the "user" role', 'messages');
    if (index > 0 && messages[index - 1].role === message.role) {
      throw new InvalidRequest(
        'messages: roles must alternate between "user" and "assistant", ' +
          `but found multiple "${message.role}" roles in a row`,
        'messages',
      );
    }
    checkContent(message, index);
    blocksOf(message).forEach((block: any, blockIndex: number) => {
      if (block?.type === 'thinking' && typeof block.signature !== 'string') {
        const param = `messages.${index}.content.${blockIndex}.thinking.signature`;
        throw new InvalidRequest(`${param}: Field required`, param);
      }
      if (block?.type === 'thinking' && block.signature !== thinkingSignature(block.thinking ?? '')) {
        throw new InvalidRequest(
          `messages.${index}.content.${blockIndex}: Invalid \`signature\` in \`thinking\` block`,
          `messages.${index}`,
        );
      }
    });
    checkToolResults(messages, index);
  });
  const thinking = body.thinking?.type === 'enabled' || body.thinking?.type === 'adaptive';
  if (thinking) checkThinkingLeadsToolLoop(messages);
}

const IMAGE_MEDIA_TYPES = new Set(['image/jpeg', 'image/png', 'image/gif', 'image/webp']);

/**
 * Content as the Messages API takes it: every message but a final assistant one has some, text
 * blocks are never empty (in a tool_result too), and an image is base64 of a supported media type or a URL.
 */
function checkContent(message: any, index: number): void {
  const content = message.content;
  if (content === '' || (Array.isArray(content) && content.length === 0))
    throw new InvalidRequest(
      `messages.${index}: all messages must have non-empty content except for the optional final assistant message`,
      `messages.${index}`,
    );
  const check = (block: any, param: string) => {
    if (block?.type === 'text' && (typeof block.text !== 'string' || block.text === ''))
      throw new InvalidRequest(`${param}: text content blocks must be non-empty`, param);
    if (block?.type !== 'image') return;
    const source = block.source ?? {};
    const valid =
      (source.type === 'base64' && IMAGE_MEDIA_TYPES.has(source.media_type) && typeof source.data === 'string') ||
      (source.type === 'url' && typeof source.url === 'string' && /^https?:\/\//.test(source.url));
    if (!valid) throw new InvalidRequest(`${param}.source: Input does not match any image source`, `${param}.source`);
  };
  blocksOf(message).forEach((block: any, blockIndex: number) => {
    const param = `messages.${index}.content.${blockIndex}`;
    check(block, param);
    if (block?.type === 'tool_result')
      asArray(block.content).forEach((inner: any, innerIndex: number) =>
        check(inner, `${param}.content.${innerIndex}`),
      );
  });
}

function blocksOf(message: any): readonly any[] {
  return asArray(message.content);
}

function toolUseIds(message: any): string[] {
  return blocksOf(message)
    .filter((block) => block?.type === 'tool_use')
    .map((block) => block.id);
}

/** Every tool_use is answered in the next message, and every tool_result answers the previous one. */
function checkToolResults(messages: any[], index: number): void {
  const message = messages[index];
  if (message.role === 'assistant') {
    const calls = toolUseIds(message);
    const answered = new Set(
      index + 1 < messages.length ? blocksOf(messages[index + 1]).map((block) => block?.tool_use_id) : [],
    );
    const unanswered = calls.filter((id) => !answered.has(id));
    if (unanswered.length > 0) {
      throw new InvalidRequest(
        `messages.${index + 1}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ` +
          `${unanswered.join(', ')}. ` +
          'Each `tool_use` block must have a corresponding `tool_result` block in the next message.',
        `messages.${index + 1}`,
      );
    }
    return;
  }
  const calls = new Set(index > 0 ? toolUseIds(messages[index - 1]) : []);
  blocksOf(message).forEach((block: any, blockIndex: number) => {
    if (block?.type === 'tool_result' && !calls.has(block.tool_use_id)) {
      throw new InvalidRequest(
        `messages.${index}.content.${blockIndex}: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ` +
          `${block.tool_use_id}. ` +
          'Each `tool_result` block must have a corresponding `tool_use` block in the previous message.',
        `messages.${index}.content.${blockIndex}`,
      );
    }
  });
}

/** With thinking on, the assistant message whose tool calls the last message answers starts with its thinking. */
function checkThinkingLeadsToolLoop(messages: any[]): void {
  const last = messages.length - 1;
  if (last < 1 || !blocksOf(messages[last]).some((block) => block?.type === 'tool_result')) return;
  const first = blocksOf(messages[last - 1])[0];
  if (first?.type === 'thinking' || first?.type === 'redacted_thinking') return;
  throw new InvalidRequest(
    `messages.${last - 1}.content.0.type: Expected \`thinking\` or \`redacted_thinking\`, ` +
      `but found \`${first?.type ?? 'text'}\`. ${THINKING_FIRST}`,
    `messages.${last - 1}.content.0.type`,
  );
}

function render({ body, answer, nextId }: RenderContext) {
  const size = chunkChars(answer);
  const id = nextId('msg_');
  const blocks = contentBlocks(answer, nextId);
  const stopReason = (answer.toolCalls ?? []).length > 0 ? 'tool_use' : 'end_turn';
  const tokens = usageOf(answer);
  const usage = {
    input_tokens: tokens.inputTokens,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: tokens.cachedInputTokens,
    output_tokens: tokens.outputTokens,
    ...(answer.search ? { server_tool_use: { web_search_requests: 1 } } : {}),
    service_tier: 'standard',
  };
  const message = (content: unknown[], stop: string | null, messageUsage: unknown) => ({
    id,
    type: 'message',
    role: 'assistant',
    model: body.model,
    content,
    stop_reason: stop,
    stop_sequence: null,
    usage: messageUsage,
  });
  const events: StreamEvent[] = [];
  const emit = (type: string, fields: Record<string, unknown> = {}) =>
    events.push({ event: type, data: { type, ...fields } });
  emit('message_start', { message: message([], null, { ...usage, output_tokens: 1 }) });
  blocks.forEach((block, index) => {
    emit('content_block_start', { index, content_block: openingOf(block) });
    if (index === 0) emit('ping');
    for (const delta of blockDeltas(block, size)) emit('content_block_delta', { index, delta });
    emit('content_block_stop', { index });
  });
  emit('message_delta', {
    delta: { stop_reason: stopReason, stop_sequence: null },
    usage: { output_tokens: tokens.outputTokens },
  });
  emit('message_stop');
  return { body: message(blocks, stopReason, usage), events };
}

function contentBlocks(answer: AnswerReply, nextId: RenderContext['nextId']): any[] {
  const blocks: any[] = [];
  if (answer.reasoning !== undefined) {
    blocks.push({ type: 'thinking', thinking: answer.reasoning, signature: thinkingSignature(answer.reasoning) });
  }
  const search = answer.search;
  if (search !== undefined) {
    const toolUseId = nextId('srvtoolu_');
    blocks.push({ type: 'server_tool_use', id: toolUseId, name: 'web_search', input: { query: search.query } });
    const content = search.results.map((result) => ({
      type: 'web_search_result',
      url: result.url,
      title: result.title,
      encrypted_content: sign('search', result.url),
      page_age: null,
    }));
    blocks.push({ type: 'web_search_tool_result', tool_use_id: toolUseId, content });
  }
  if (answer.text !== undefined) {
    const citations = search?.results.map((result) => ({
      type: 'web_search_result_location',
      url: result.url,
      title: result.title,
      encrypted_index: sign('index', result.url),
      cited_text: answer.text,
    }));
    blocks.push({ type: 'text', text: answer.text, ...(citations ? { citations } : {}) });
  }
  for (const call of answer.toolCalls ?? []) {
    blocks.push({ type: 'tool_use', id: call.id, name: call.name, input: JSON.parse(call.arguments) });
  }
  return blocks;
}

/** A block as `content_block_start` announces it: empty where deltas will fill it in. */
function openingOf(block: any): unknown {
  switch (block.type) {
    case 'thinking':
      return { type: 'thinking', thinking: '', signature: '' };
    case 'text':
      return { type: 'text', text: '', ...(block.citations ? { citations: [] } : {}) };
    case 'tool_use':
    case 'server_tool_use':
      return { ...block, input: {} };
    default:
      return block;
  }
}

function blockDeltas(block: any, size: number): unknown[] {
  switch (block.type) {
    case 'thinking':
      return [
        ...pieces(block.thinking, size).map((thinking) => ({ type: 'thinking_delta', thinking })),
        { type: 'signature_delta', signature: block.signature },
      ];
    case 'text':
      return [
        ...pieces(block.text, size).map((text) => ({ type: 'text_delta', text })),
        ...asArray(block.citations).map((citation) => ({ type: 'citations_delta', citation })),
      ];
    case 'tool_use':
    case 'server_tool_use':
      return pieces(JSON.stringify(block.input), size).map((partial_json) => ({
        type: 'input_json_delta',
        partial_json,
      }));
    default:
      return [];
  }
}
