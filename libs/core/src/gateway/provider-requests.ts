import { z } from 'zod';
import { findUnstorableJson } from '../chunks/storable-json.js';
import { fieldPath } from '../dialects/dialect.js';
import type { ToolResult } from '../history/conversation.js';
import {
  ConversationBuilder,
  ModelCallRequestError,
  parsedArguments,
  textOf,
  type ModelCallRequest,
} from './model-call-request.js';

/**
 * The requests of the providers the gateway speaks, read into a `ModelCallRequest`: OpenAI Chat
 * Completions, OpenAI Responses and Anthropic Messages. Only what the record needs is checked;
 * everything else goes to the provider as the client sent it, and the provider judges it. Parts
 * the record has no place for (images, server tool blocks, item references) are not recorded.
 */
export type GatewayProtocol = 'openai-chat' | 'openai-responses' | 'anthropic-messages';

type Json = Record<string, unknown>;

const common = { model: z.string().min(1).max(256), stream: z.boolean().nullish() };

const chatRequest = z
  .object({ ...common, messages: z.array(z.object({ role: z.string() }).passthrough()).min(1) })
  .passthrough();

const responsesRequest = z
  .object({
    ...common,
    input: z.union([z.string(), z.array(z.object({}).passthrough())]).optional(),
    instructions: z.string().nullish(),
    previous_response_id: z.string().nullish(),
  })
  .passthrough();

const anthropicRequest = z
  .object({
    ...common,
    max_tokens: z.number().int().positive(),
    system: z.union([z.string(), z.array(z.object({ type: z.string() }).passthrough())]).optional(),
    messages: z.array(z.object({ role: z.enum(['user', 'assistant']), content: z.unknown() }).passthrough()).min(1),
  })
  .passthrough();

export function readModelCallRequest(protocol: GatewayProtocol, body: unknown): ModelCallRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new ModelCallRequestError('', 'the request body must be a JSON object');
  }
  const unstorable = findUnstorableJson(body);
  if (unstorable) throw new ModelCallRequestError(fieldPath(unstorable.path), unstorable.message);
  switch (protocol) {
    case 'openai-chat':
      return readChat(parse(chatRequest, body));
    case 'openai-responses':
      return readResponses(parse(responsesRequest, body));
    case 'anthropic-messages':
      return readAnthropic(parse(anthropicRequest, body));
  }
}

function parse<T>(schema: z.ZodType<T>, body: unknown): T {
  const result = schema.safeParse(body);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  throw new ModelCallRequestError(fieldPath(issue.path), issue.message);
}

const CHAT_TEXT = ['text'];

function readChat(request: z.infer<typeof chatRequest>): ModelCallRequest {
  const conversation = new ConversationBuilder();
  request.messages.forEach((message: Json, index) => {
    const field = `messages[${index}]`;
    switch (message.role) {
      case 'system':
      case 'developer':
        return conversation.system(textOf(message.content, CHAT_TEXT));
      case 'user':
        return conversation.user(textOf(message.content, CHAT_TEXT));
      case 'assistant': {
        conversation.openRound();
        if (typeof message.reasoning_content === 'string' && message.reasoning_content !== '') {
          conversation.thinking({ text: message.reasoning_content });
        }
        conversation.text(textOf(message.content, [...CHAT_TEXT, 'refusal']));
        const calls = Array.isArray(message.tool_calls) ? objectsOf(message.tool_calls, `${field}.tool_calls`) : [];
        calls.forEach((call, callIndex) => {
          const callField = `${field}.tool_calls[${callIndex}]`;
          const fn = (call.function ?? {}) as Json;
          const id = requiredString(call.id, `${callField}.id`);
          const name = requiredString(fn.name, `${callField}.function.name`);
          const args = typeof fn.arguments === 'string' ? fn.arguments : '';
          conversation.toolCall(id, name, parsedArguments(args, `${callField}.function.arguments`));
        });
        return;
      }
      case 'tool':
      case 'function': {
        const id = requiredString(message.tool_call_id, `${field}.tool_call_id`);
        return conversation.toolResult(id, { content: textOf(message.content, CHAT_TEXT), isError: false }, field);
      }
      default:
        throw new ModelCallRequestError(`${field}.role`, `unknown role ${JSON.stringify(message.role)}`);
    }
  });
  return {
    model: request.model,
    stream: request.stream === true,
    turns: conversation.build(),
    previousResponseId: undefined,
    leadingResults: [],
  };
}

const RESPONSES_TEXT = ['input_text', 'output_text', 'text'];

function readResponses(request: z.infer<typeof responsesRequest>): ModelCallRequest {
  const previousResponseId = request.previous_response_id ?? undefined;
  const conversation = new ConversationBuilder(previousResponseId !== undefined);
  if (request.instructions) conversation.system(request.instructions);
  const items = typeof request.input === 'string' ? [{ role: 'user', content: request.input }] : (request.input ?? []);
  // One response's output items, parallel calls included, are a round; the first after the outputs opens the next.
  let roundOpen = false;
  const assistantItem = () => {
    if (!roundOpen) conversation.openRound();
    roundOpen = true;
  };
  items.forEach((item: Json, index) => {
    const field = `input[${index}]`;
    const type = item.type ?? 'message';
    if (type === 'message') {
      const role = item.role;
      if (role === 'assistant') {
        assistantItem();
        return conversation.text(textOf(item.content, RESPONSES_TEXT));
      }
      roundOpen = false;
      if (role === 'system' || role === 'developer') return conversation.system(textOf(item.content, RESPONSES_TEXT));
      if (role === 'user') return conversation.user(textOf(item.content, RESPONSES_TEXT));
      throw new ModelCallRequestError(`${field}.role`, `unknown role ${JSON.stringify(role)}`);
    }
    if (type === 'reasoning') {
      assistantItem();
      const summary = Array.isArray(item.summary) ? objectsOf(item.summary, `${field}.summary`) : [];
      const text = summary.map((part) => (typeof part.text === 'string' ? part.text : '')).join('\n\n');
      return conversation.thinking({ text, item });
    }
    if (type === 'function_call') {
      assistantItem();
      const id = requiredString(item.call_id, `${field}.call_id`);
      const name = requiredString(item.name, `${field}.name`);
      const args = typeof item.arguments === 'string' ? item.arguments : '';
      return conversation.toolCall(id, name, parsedArguments(args, `${field}.arguments`));
    }
    if (type === 'function_call_output') {
      roundOpen = false;
      const id = requiredString(item.call_id, `${field}.call_id`);
      return conversation.toolResult(id, { content: textOf(item.output, RESPONSES_TEXT), isError: false }, field);
    }
    // Other items (server tool calls, item references, …) go to the provider; the record has no turn for them.
  });
  return {
    model: request.model,
    stream: request.stream === true,
    turns: conversation.build(),
    previousResponseId,
    leadingResults: conversation.leadingResults,
  };
}

const ANTHROPIC_TEXT = ['text'];

function readAnthropic(request: z.infer<typeof anthropicRequest>): ModelCallRequest {
  const conversation = new ConversationBuilder();
  if (request.system !== undefined) conversation.system(textOf(request.system, ANTHROPIC_TEXT));
  request.messages.forEach((message, index) => {
    const field = `messages[${index}].content`;
    const blocks: Json[] =
      typeof message.content === 'string'
        ? [{ type: 'text', text: message.content }]
        : contentBlocks(message.content, field);
    if (message.role === 'assistant') {
      conversation.openRound();
      blocks.forEach((block, blockIndex) => readAssistantBlock(conversation, block, `${field}[${blockIndex}]`));
      return;
    }
    const text: string[] = [];
    blocks.forEach((block, blockIndex) => {
      const blockField = `${field}[${blockIndex}]`;
      if (block.type === 'tool_result') {
        const id = requiredString(block.tool_use_id, `${blockField}.tool_use_id`);
        const result: ToolResult = { content: textOf(block.content, ANTHROPIC_TEXT), isError: block.is_error === true };
        conversation.toolResult(id, result, blockField);
      } else if (block.type === 'text' && typeof block.text === 'string') text.push(block.text);
    });
    // A turn of tool results only continues the assistant's message; text alongside them is the user's next turn.
    if (text.length > 0 || !blocks.some((block) => block.type === 'tool_result')) conversation.user(text.join('\n'));
  });
  return {
    model: request.model,
    stream: request.stream === true,
    turns: conversation.build(),
    previousResponseId: undefined,
    leadingResults: [],
  };
}

function readAssistantBlock(conversation: ConversationBuilder, block: Json, field: string): void {
  switch (block.type) {
    case 'text':
      return conversation.text(typeof block.text === 'string' ? block.text : '');
    case 'thinking':
      return conversation.thinking({
        text: typeof block.thinking === 'string' ? block.thinking : '',
        ...(typeof block.signature === 'string' ? { signature: block.signature } : {}),
      });
    case 'redacted_thinking':
      return conversation.thinking({ text: '', item: block });
    case 'tool_use': {
      const id = requiredString(block.id, `${field}.id`);
      const name = requiredString(block.name, `${field}.name`);
      return conversation.toolCall(id, name, block.input ?? {});
    }
    default:
    // Server tool blocks and the like go to the provider; the record has no part for them.
  }
}

function contentBlocks(content: unknown, field: string): Json[] {
  if (!Array.isArray(content)) throw new ModelCallRequestError(field, 'must be a string or an array of content blocks');
  return objectsOf(content, field);
}

/** A list's items, each an object (`null` among them answered 500 where a member was read). */
function objectsOf(items: readonly unknown[], field: string): Json[] {
  return items.map((item, index) => {
    if (typeof item !== 'object' || item === null || Array.isArray(item))
      throw new ModelCallRequestError(`${field}[${index}]`, 'must be an object');
    return item as Json;
  });
}

function requiredString(value: unknown, field: string): string {
  if (typeof value !== 'string' || value === '')
    throw new ModelCallRequestError(field, 'is required and must be a non-empty string');
  return value;
}
