import { findUnstorableJson } from '../chunks/storable-json.js';
import type { Round, ThinkingPart, ToolCallPart, ToolResult, Turn } from '../history/conversation.js';

/**
 * A model call as the gateway records it, whatever the provider: the model, whether the answer
 * streams, and the conversation the request sends. Each provider's request reader fills a
 * `ConversationBuilder` in the order its messages come.
 */
export interface ModelCallRequest {
  readonly model: string;
  readonly stream: boolean;
  readonly turns: readonly Turn[];
  /** The request names an earlier response instead of sending the conversation (Responses `previous_response_id`). */
  readonly previousResponseId: string | undefined;
  /** With `previousResponseId`: results for the calls of that response, sent before any turn. */
  readonly leadingResults: readonly LeadingResult[];
}

export interface LeadingResult {
  readonly toolId: string;
  readonly result: ToolResult;
}

/** A request the gateway refuses before calling a model; `field` is the provider's own parameter path. */
export class ModelCallRequestError extends Error {
  override readonly name = 'ModelCallRequestError';
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

interface OpenRound {
  text: string[];
  thinking: ThinkingPart[];
  tools: { -readonly [Key in keyof ToolCallPart]: ToolCallPart[Key] }[];
}

type DraftTurn = Extract<Turn, { role: 'system' | 'user' }> | { role: 'assistant'; rounds: OpenRound[] };

/**
 * Turns from a provider's messages. Consecutive assistant messages and the tool results between
 * them are one assistant turn (seed ADR option 2); each assistant message opens a round.
 */
export class ConversationBuilder {
  private readonly turns: DraftTurn[] = [];
  readonly leadingResults: LeadingResult[] = [];

  /** `continuesEarlierTurns`: results before any turn answer calls the request does not repeat (Responses `previous_response_id`). */
  constructor(private readonly continuesEarlierTurns = false) {}

  system(content: string): void {
    this.turns.push({ role: 'system', content });
  }

  user(content: string): void {
    this.turns.push({ role: 'user', content });
  }

  /** The next assistant message or output item group: a new round of the current assistant turn. */
  openRound(): void {
    const last = this.turns.at(-1);
    const round: OpenRound = { text: [], thinking: [], tools: [] };
    if (last?.role === 'assistant') last.rounds.push(round);
    else this.turns.push({ role: 'assistant', rounds: [round] });
  }

  text(text: string): void {
    if (text !== '') this.round().text.push(text);
  }

  thinking(part: ThinkingPart): void {
    this.round().thinking.push(part);
  }

  toolCall(id: string, name: string, args: unknown): void {
    this.round().tools.push({ id, name, arguments: args, result: undefined, status: 'pending' });
  }

  /** A result answers a call of the assistant turn just before it. */
  toolResult(toolId: string, result: ToolResult, field: string): void {
    if (this.turns.length === 0 && this.continuesEarlierTurns) {
      this.leadingResults.push({ toolId, result });
      return;
    }
    const last = this.turns.at(-1);
    const rounds = last?.role === 'assistant' ? last.rounds : [];
    const call = rounds.flatMap((round) => round.tools).find((tool) => tool.id === toolId);
    if (!call)
      throw new ModelCallRequestError(field, `no tool call ${JSON.stringify(toolId)} of the assistant turn before it`);
    if (call.result) throw new ModelCallRequestError(field, `tool call ${JSON.stringify(toolId)} is answered twice`);
    call.result = result;
  }

  build(): Turn[] {
    return this.turns.map((turn): Turn => {
      if (turn.role !== 'assistant') return turn;
      const rounds = turn.rounds.map((round): Round => ({ ...round, text: round.text.join('\n\n') }));
      return { role: 'assistant', rounds: rounds.filter((round) => round.text !== '' || round.tools.length > 0) };
    });
  }

  private round(): OpenRound {
    const last = this.turns.at(-1);
    if (last?.role === 'assistant') return last.rounds.at(-1)!;
    this.openRound();
    return this.round();
  }
}

/** Text of a provider's content: a string, or the text parts of an array of parts (other parts are not recorded as text). */
export function textOf(content: unknown, textTypes: readonly string[]): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .filter((part): part is { type: string; text: string } => {
      const { type, text } = (part ?? {}) as { type?: unknown; text?: unknown };
      return typeof type === 'string' && textTypes.includes(type) && typeof text === 'string';
    })
    .map((part) => part.text)
    .join('\n');
}

/** Tool arguments as a provider sends them back: a JSON text, read as the value it stands for. */
export function parsedArguments(text: string, field: string): unknown {
  if (text.trim() === '') return {};
  let value: unknown;
  try {
    value = JSON.parse(text) as unknown;
  } catch {
    throw new ModelCallRequestError(field, 'is not valid JSON');
  }
  // The body's own check saw a string: what it holds must be storable too.
  const unstorable = findUnstorableJson(value);
  if (unstorable) throw new ModelCallRequestError(field, `holds what the log cannot store: ${unstorable.message}`);
  return value;
}
