import { canonicalJson } from '../hashing/canonical-json.js';
import {
  conversationOf,
  resultOf,
  type Attachment,
  type HistoryMessage,
  type ImageData,
  type Round,
  type ToolResult,
  type Turn,
} from './conversation.js';

/**
 * The model history of an active path (DESIGN §5, seed ADR option 2), in each provider's format:
 * per round of an assistant message, the round's reasoning, text and tool calls, then one result
 * per call, so the conversation can be sent back to a model as it happened. Every tool call gets
 * a result: its content, or for a call that never finished or was denied, an error saying so.
 * JSON is canonical (sorted keys), so the history is the same whether read from the read models
 * (jsonb) or the log. An MCP result goes as what it says (its text, its images where the format
 * takes images in a tool result, an error marked as one); a user's attached images go as image
 * parts, other files as text references; no format gets an empty text block.
 */
export interface HistoryOptions {
  /**
   * Reasoning goes back as `reasoning_content` (OpenAI-compatible servers), thinking blocks with
   * their signatures (Anthropic) or reasoning items (Responses).
   */
  readonly includeThinking: boolean;
}

/** OpenAI Chat Completions messages (`ChatCompletionMessageParam`). */
export type OpenAiMessage =
  | { role: 'system'; content: string }
  | { role: 'user'; content: string | OpenAiUserPart[] }
  | { role: 'assistant'; content: string | null; tool_calls?: OpenAiToolCall[]; reasoning_content?: string }
  | { role: 'tool'; tool_call_id: string; content: string };

export type OpenAiUserPart = { type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string } };

export interface OpenAiToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

/** Anthropic Messages API content blocks. */
export type AnthropicBlock =
  | { type: 'text'; text: string }
  | { type: 'thinking'; thinking: string; signature?: string }
  | Readonly<Record<string, unknown>>
  | { type: 'tool_use'; id: string; name: string; input: unknown }
  | { type: 'tool_result'; tool_use_id: string; content?: string | AnthropicBlock[]; is_error?: boolean };

export interface AnthropicHistory {
  system?: string;
  messages: { role: 'user' | 'assistant'; content: AnthropicBlock[] }[];
}

/** OpenAI Responses input items; system turns go to `instructions`. */
export type ResponsesItem =
  | { role: 'user'; content: string | ResponsesInputPart[] }
  | { type: 'message'; role: 'assistant'; content: { type: 'output_text'; text: string }[] }
  | { type: 'function_call'; call_id: string; name: string; arguments: string }
  | { type: 'function_call_output'; call_id: string; output: string | ResponsesInputPart[] }
  | Readonly<Record<string, unknown>>;

export type ResponsesInputPart =
  { type: 'input_text'; text: string } | { type: 'input_image'; image_url: string; detail: 'auto' };

export interface ResponsesHistory {
  instructions?: string;
  input: ResponsesItem[];
}

export function openAiHistory(path: readonly HistoryMessage[], { includeThinking }: HistoryOptions): OpenAiMessage[] {
  return conversationOf(path).flatMap((turn): OpenAiMessage[] => {
    if (turn.role !== 'assistant')
      return [
        turn.role === 'system'
          ? { role: 'system', content: turn.content }
          : { role: 'user', content: openAiUserContent(turn) },
      ];
    return turn.rounds.flatMap((round): OpenAiMessage[] => {
      const reasoning = round.thinking
        .map((part) => part.text)
        .filter((text) => text !== '')
        .join('\n\n');
      return [
        {
          role: 'assistant',
          content: round.text === '' ? null : round.text,
          ...(round.tools.length > 0
            ? {
                tool_calls: round.tools.map((tool) => ({
                  id: tool.id,
                  type: 'function' as const,
                  function: { name: tool.name, arguments: canonicalJson(tool.arguments) },
                })),
              }
            : {}),
          ...(includeThinking && reasoning !== '' ? { reasoning_content: reasoning } : {}),
        },
        ...round.tools.flatMap((tool): OpenAiMessage[] => {
          const result = resultOf(tool);
          return result ? [{ role: 'tool', tool_call_id: tool.id, content: openAiToolContent(result) }] : [];
        }),
      ];
    });
  });
}

/** Consecutive turns of one role are merged, as the Messages API expects alternating turns; system turns go to `system`. */
export function anthropicHistory(
  path: readonly HistoryMessage[],
  { includeThinking }: HistoryOptions,
): AnthropicHistory {
  const system: string[] = [];
  const messages: AnthropicHistory['messages'] = [];
  const push = (role: 'user' | 'assistant', content: AnthropicBlock[]) => {
    if (content.length === 0) return;
    const last = messages.at(-1);
    if (last?.role === role) last.content.push(...content);
    else messages.push({ role, content });
  };
  for (const turn of conversationOf(path)) {
    if (turn.role !== 'assistant') {
      if (turn.role === 'system') system.push(turn.content);
      else push('user', anthropicUserContent(turn));
    } else {
      for (const round of turn.rounds) {
        push('assistant', [
          ...(includeThinking ? anthropicThinking(round) : []),
          ...(round.text !== '' ? [{ type: 'text' as const, text: round.text }] : []),
          ...round.tools.map((tool) => ({
            type: 'tool_use' as const,
            id: tool.id,
            name: tool.name,
            input: tool.arguments,
          })),
        ]);
        push(
          'user',
          round.tools.flatMap((tool) => {
            const result = resultOf(tool);
            if (!result) return [];
            return [anthropicToolResult(tool.id, result)];
          }),
        );
      }
    }
  }
  return { ...(system.length > 0 ? { system: system.join('\n\n') } : {}), messages };
}

/** Responses input items; reasoning goes back as the reasoning items the provider sent (with their encrypted content). */
export function responsesHistory(
  path: readonly HistoryMessage[],
  { includeThinking }: HistoryOptions,
): ResponsesHistory {
  const instructions: string[] = [];
  const input: ResponsesItem[] = [];
  for (const turn of conversationOf(path)) {
    if (turn.role !== 'assistant') {
      if (turn.role === 'system') instructions.push(turn.content);
      else input.push({ role: 'user', content: responsesUserContent(turn) });
    } else {
      for (const round of turn.rounds) {
        if (includeThinking)
          input.push(...round.thinking.flatMap((part) => (part.item?.type === 'reasoning' ? [part.item] : [])));
        if (round.text !== '')
          input.push({ type: 'message', role: 'assistant', content: [{ type: 'output_text', text: round.text }] });
        for (const tool of round.tools) {
          input.push({
            type: 'function_call',
            call_id: tool.id,
            name: tool.name,
            arguments: canonicalJson(tool.arguments),
          });
        }
        for (const tool of round.tools) {
          const result = resultOf(tool);
          if (result) input.push({ type: 'function_call_output', call_id: tool.id, output: responsesOutput(result) });
        }
      }
    }
  }
  return { ...(instructions.length > 0 ? { instructions: instructions.join('\n\n') } : {}), input };
}

/** Thinking blocks as Anthropic sent them: with their signatures, and redacted ones as they came. */
function anthropicThinking(round: Round): AnthropicBlock[] {
  return round.thinking.flatMap((part): AnthropicBlock[] => {
    if (part.item?.type === 'redacted_thinking') return [part.item];
    if (part.text === '') return [];
    return [
      { type: 'thinking', thinking: part.text, ...(part.signature === undefined ? {} : { signature: part.signature }) },
    ];
  });
}

type UserTurn = Extract<Turn, { role: 'system' | 'user' }>;

/** A file the model is told of by reference: what it is and where, never its bytes. */
function fileReference({ name, mimeType, size, sha256, url }: Attachment): string {
  return `[attached file: ${name} (${mimeType}, ${size} bytes, sha256 ${sha256}) ${url}]`;
}

/** An image a format cannot carry where it sits (a Chat Completions tool message holds text only). */
function imageNote({ mimeType }: ImageData): string {
  return `[image: ${mimeType}, not sent: this format has no place for it]`;
}

/** The parts of a turn, text first, as each format spells text, images and file references; no empty text. */
function userParts<Part>(
  turn: UserTurn,
  text: (text: string) => Part,
  image: (attachment: Attachment) => Part,
): string | Part[] {
  if (!turn.attachments) return turn.content;
  return [
    ...(turn.content === '' ? [] : [text(turn.content)]),
    ...turn.attachments.map((attachment) => (attachment.image ? image(attachment) : text(fileReference(attachment)))),
  ];
}

function openAiUserContent(turn: UserTurn): string | OpenAiUserPart[] {
  return userParts<OpenAiUserPart>(
    turn,
    (text) => ({ type: 'text', text }),
    ({ url }) => ({ type: 'image_url', image_url: { url } }),
  );
}

function openAiToolContent({ content, images = [] }: ToolResult): string {
  return [content, ...images.map(imageNote)].filter((text) => text !== '').join('\n');
}

function anthropicUserContent(turn: UserTurn): AnthropicBlock[] {
  const parts = userParts<AnthropicBlock>(
    turn,
    (text) => ({ type: 'text', text }),
    ({ url }) => ({ type: 'image', source: { type: 'url', url } }),
  );
  return typeof parts === 'string' ? (parts === '' ? [] : [{ type: 'text', text: parts }]) : parts;
}

/** The media types the Messages API takes as a base64 image. */
const ANTHROPIC_IMAGE_TYPES = new Set(['image/jpeg', 'image/png', 'image/gif', 'image/webp']);

/** A tool result with its images as image blocks, an error marked `is_error`, and no empty content. */
function anthropicToolResult(toolUseId: string, { content, isError, images = [] }: ToolResult): AnthropicBlock {
  const blocks: AnthropicBlock[] = [
    ...(content === '' ? [] : [{ type: 'text' as const, text: content }]),
    ...images.map((image) =>
      ANTHROPIC_IMAGE_TYPES.has(image.mimeType)
        ? { type: 'image', source: { type: 'base64', media_type: image.mimeType, data: image.data } }
        : { type: 'text' as const, text: imageNote(image) },
    ),
  ];
  const body = images.length === 0 ? (content === '' ? {} : { content }) : { content: blocks };
  return { type: 'tool_result', tool_use_id: toolUseId, ...body, ...(isError ? { is_error: true } : {}) };
}

function responsesUserContent(turn: UserTurn): string | ResponsesInputPart[] {
  return userParts<ResponsesInputPart>(
    turn,
    (text) => ({ type: 'input_text', text }),
    ({ url }) => ({ type: 'input_image', image_url: url, detail: 'auto' }),
  );
}

function responsesOutput({ content, images = [] }: ToolResult): string | ResponsesInputPart[] {
  if (images.length === 0) return content;
  return [
    ...(content === '' ? [] : [{ type: 'input_text' as const, text: content }]),
    ...images.map(({ data, mimeType }) => ({
      type: 'input_image' as const,
      image_url: `data:${mimeType};base64,${data}`,
      detail: 'auto' as const,
    })),
  ];
}
