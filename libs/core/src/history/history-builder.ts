import { canonicalJson } from '../hashing/canonical-json.js';
import { conversationOf, resultOf, type HistoryMessage, type Round } from './conversation.js';

/**
 * The model history of an active path (DESIGN §5, seed ADR option 2), in each provider's format:
 * per round of an assistant message, the round's reasoning, text and tool calls, then one result
 * per call, so the conversation can be sent back to a model as it happened. Every tool call gets
 * a result: its content, or for a call that never finished or was denied, an error saying so.
 * JSON is canonical (sorted keys), so the history is the same whether read from the read models
 * (jsonb) or the log.
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
  | { type: 'thinking'; thinking: string; signature?: string }
  | Readonly<Record<string, unknown>>
  | { type: 'tool_use'; id: string; name: string; input: unknown }
  | { type: 'tool_result'; tool_use_id: string; content: string; is_error?: boolean };

export interface AnthropicHistory {
  system?: string;
  messages: { role: 'user' | 'assistant'; content: AnthropicBlock[] }[];
}

/** OpenAI Responses input items; system turns go to `instructions`. */
export type ResponsesItem =
  | { role: 'user'; content: string }
  | { type: 'message'; role: 'assistant'; content: { type: 'output_text'; text: string }[] }
  | { type: 'function_call'; call_id: string; name: string; arguments: string }
  | { type: 'function_call_output'; call_id: string; output: string }
  | Readonly<Record<string, unknown>>;

export interface ResponsesHistory {
  instructions?: string;
  input: ResponsesItem[];
}

export function openAiHistory(path: readonly HistoryMessage[], { includeThinking }: HistoryOptions): OpenAiMessage[] {
  return conversationOf(path).flatMap((turn): OpenAiMessage[] => {
    if (turn.role !== 'assistant') return [{ role: turn.role, content: turn.content }];
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
          return result ? [{ role: 'tool', tool_call_id: tool.id, content: result.content }] : [];
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
      else push('user', [{ type: 'text', text: turn.content }]);
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
            return [
              {
                type: 'tool_result' as const,
                tool_use_id: tool.id,
                content: result.content,
                ...(result.isError ? { is_error: true } : {}),
              },
            ];
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
      else input.push({ role: 'user', content: turn.content });
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
          if (result) input.push({ type: 'function_call_output', call_id: tool.id, output: result.content });
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
