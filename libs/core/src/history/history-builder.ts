import type { MessageBlock } from '../blocks/message-block.js';
import { canonicalJson } from '../hashing/canonical-json.js';
import { decodeToolResults } from '../toolcall/tool-result-encoding.js';

/**
 * The model history of an active path (DESIGN §5, seed ADR option 2): per round of an assistant
 * message, one assistant message with the round's text and its tool calls, then one result per
 * call, so the conversation can be sent back to a model as it happened.
 *
 * A round is the blocks up to and including its tool calls: a text or thinking block after a
 * tool block starts the next round. Citation, image, video and error blocks are display only.
 * Every tool call gets a result: its content (strings as they are, anything else as JSON), or
 * for a call that never finished or was denied, an error saying so. JSON is canonical (sorted
 * keys), so the history is the same whether read from the read models (jsonb) or the log.
 */
export interface HistoryMessage {
  readonly role: string;
  readonly content: string | null;
  readonly blocks: readonly MessageBlock[];
}

export interface HistoryOptions {
  /** Thinking goes in as `reasoning_content` (OpenAI-compatible servers) or thinking blocks (Anthropic). */
  readonly includeThinking: boolean;
}

/** OpenAI Chat Completions messages (`ChatCompletionMessageParam`). */
export type OpenAiMessage =
  | { role: 'system'; content: string }
  | { role: 'user'; content: string }
  | { role: 'assistant'; content: string | null; tool_calls?: OpenAiToolCall[]; reasoning_content?: string }
  | { role: 'tool'; tool_call_id: string; content: string };

export interface OpenAiToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

/** Anthropic Messages API content blocks. */
export type AnthropicBlock =
  | { type: 'text'; text: string }
  | { type: 'thinking'; thinking: string }
  | { type: 'tool_use'; id: string; name: string; input: unknown }
  | { type: 'tool_result'; tool_use_id: string; content: string; is_error?: boolean };

export interface AnthropicHistory {
  system?: string;
  messages: { role: 'user' | 'assistant'; content: AnthropicBlock[] }[];
}

interface Round {
  readonly text: string;
  readonly thinking: string;
  readonly tools: readonly ToolCall[];
}

interface ToolCall {
  readonly id: string;
  readonly name: string;
  readonly arguments: unknown;
  readonly result: string;
  readonly isError: boolean;
}

export function openAiHistory(path: readonly HistoryMessage[], { includeThinking }: HistoryOptions): OpenAiMessage[] {
  return path.flatMap((message): OpenAiMessage[] => {
    if (message.role === 'system') return [{ role: 'system', content: message.content ?? '' }];
    if (message.role === 'user') return [{ role: 'user', content: message.content ?? '' }];
    if (message.role !== 'assistant') return [];
    return rounds(message).flatMap((round): OpenAiMessage[] => [
      {
        role: 'assistant',
        content: round.text === '' ? null : round.text,
        ...(round.tools.length > 0 ? { tool_calls: round.tools.map((tool) => ({ id: tool.id, type: 'function' as const, function: { name: tool.name, arguments: canonicalJson(tool.arguments ?? {}) } })) } : {}),
        ...(includeThinking && round.thinking !== '' ? { reasoning_content: round.thinking } : {}),
      },
      ...round.tools.map((tool): OpenAiMessage => ({ role: 'tool', tool_call_id: tool.id, content: tool.result })),
    ]);
  });
}

/** Consecutive turns of one role are merged, as the Messages API expects alternating turns; system messages go to `system`. */
export function anthropicHistory(path: readonly HistoryMessage[], { includeThinking }: HistoryOptions): AnthropicHistory {
  const system: string[] = [];
  const messages: AnthropicHistory['messages'] = [];
  const push = (role: 'user' | 'assistant', content: AnthropicBlock[]) => {
    if (content.length === 0) return;
    const last = messages.at(-1);
    if (last?.role === role) last.content.push(...content);
    else messages.push({ role, content });
  };
  for (const message of path) {
    if (message.role === 'system') system.push(message.content ?? '');
    else if (message.role === 'user') push('user', [{ type: 'text', text: message.content ?? '' }]);
    else if (message.role === 'assistant') {
      for (const round of rounds(message)) {
        push('assistant', [
          ...(includeThinking && round.thinking !== '' ? [{ type: 'thinking' as const, thinking: round.thinking }] : []),
          ...(round.text !== '' ? [{ type: 'text' as const, text: round.text }] : []),
          ...round.tools.map((tool) => ({ type: 'tool_use' as const, id: tool.id, name: tool.name, input: tool.arguments ?? {} })),
        ]);
        push('user', round.tools.map((tool) => ({ type: 'tool_result' as const, tool_use_id: tool.id, content: tool.result, ...(tool.isError ? { is_error: true } : {}) })));
      }
    }
  }
  return { ...(system.length > 0 ? { system: system.join('\n\n') } : {}), messages };
}

/** The rounds of an assistant message that say or call something; a message created with whole `content` and no chunks is one round of text. */
function rounds(message: HistoryMessage): Round[] {
  if (message.blocks.length === 0) return message.content ? [{ text: message.content, thinking: '', tools: [] }] : [];
  const grouped: { text: string[]; thinking: string[]; tools: ToolCall[] }[] = [];
  let current: (typeof grouped)[number] | undefined;
  for (const block of message.blocks) {
    if (block.type !== 'main_text' && block.type !== 'thinking' && block.type !== 'tool') continue;
    if (!current || (block.type !== 'tool' && current.tools.length > 0)) {
      current = { text: [], thinking: [], tools: [] };
      grouped.push(current);
    }
    if (block.type === 'tool') current.tools.push(toolCall(block));
    else if (typeof block.content === 'string' && block.content !== '') (block.type === 'main_text' ? current.text : current.thinking).push(block.content);
  }
  return grouped
    .map((round) => ({ text: round.text.join('\n\n'), thinking: round.thinking.join('\n\n'), tools: round.tools }))
    .filter((round) => round.text !== '' || round.tools.length > 0);
}

function toolCall(block: MessageBlock): ToolCall {
  const base = { id: block.toolId ?? block.id, name: block.toolName ?? 'unknown_tool', arguments: block.arguments };
  // A result the log stored wrapped goes to the model as it came.
  const content = decodeToolResults(block.content);
  if (content !== undefined && content !== null) {
    const result = typeof content === 'string' ? content : canonicalJson(content);
    return { ...base, result, isError: block.status === 'error' };
  }
  const raw = block.metadata?.rawMcpToolResponse as { status?: string } | undefined;
  return { ...base, result: canonicalJson({ error: `the tool call did not complete (status: ${raw?.status ?? block.status})` }), isError: true };
}
