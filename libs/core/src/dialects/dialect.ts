import type { z } from 'zod';
import type { Chunk, McpToolResponse } from '../chunks/chunk-schemas.js';
import { isJsonObject } from '../chunks/storable-json.js';

/**
 * A producer dialect: a provider's own stream format, translated into Cherry chunks by a small
 * stateful fold. The translators are pure and deterministic, so the ledger can rebuild a
 * translator's state by folding again the provider events it recorded (ADR 0015).
 */
export type UnnumberedChunk = Chunk extends infer C
  ? C extends Chunk
    ? { [K in keyof C as string extends K ? never : K extends 'seq' ? never : K]: C[K] }
    : never
  : never;

/**
 * A text or thinking delta as a translator makes it: its part's text so far (rule 4), and `grownBy`, what this
 * event added to it. The ledger records the piece without comparing the two texts, so each delta of a long
 * answer costs what it adds, not the answer so far.
 */
export interface GrownDelta {
  readonly type: 'text.delta' | 'thinking.delta';
  readonly text: string;
  readonly grownBy: string;
}

export const grownDelta = (type: GrownDelta['type'], before: string, piece: string): GrownDelta => ({
  type,
  text: before + piece,
  grownBy: piece,
});

/** A streaming tool call's arguments as a translator makes them: its response, and `grownBy`, what this event added. */
export interface GrownToolArguments {
  readonly type: 'mcp_tool_streaming';
  readonly responses: [McpToolResponse];
  readonly grownBy: string;
}

/** A chunk a translator makes. */
export type TranslatedChunk = UnnumberedChunk | GrownDelta | GrownToolArguments;

export interface Translation<State> {
  readonly state: State;
  /** The Cherry chunks the event stands for, in order; the ledger numbers them. */
  readonly chunks: readonly TranslatedChunk[];
}

export interface Translator<State> {
  readonly initial: State;
  /** Throws `DialectError` when the event is malformed or does not fit the stream so far. */
  translate(state: State, event: unknown): Translation<State>;
}

/** A provider event the dialect refuses; `field` is relative to the event ('' for the whole event). */
export class DialectError extends Error {
  override readonly name = 'DialectError';
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

/** `['choices', 0, 'delta']` → `choices[0].delta`. */
export function fieldPath(path: readonly PropertyKey[]): string {
  return path.reduce<string>((text, key) => {
    if (typeof key === 'number') return `${text}[${key}]`;
    return text === '' ? String(key) : `${text}.${String(key)}`;
  }, '');
}

/** The event as `schema` reads it, or a `DialectError` naming the first field that does not fit. */
export function parseEvent<T>(schema: z.ZodType<T>, event: unknown): T {
  const result = schema.safeParse(event);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const keys = issue.code === 'unrecognized_keys' ? issue.keys.slice(0, 1) : [];
  const message = issue.code === 'unrecognized_keys' ? 'is not a field of this event' : issue.message;
  throw new DialectError(fieldPath([...issue.path, ...keys]), message);
}

/** Tool arguments once they are complete: a JSON object, or `undefined` when the text is not one. */
export function completeArguments(text: string): Record<string, unknown> | undefined {
  if (text.trim() === '') return {};
  try {
    const value: unknown = JSON.parse(text);
    return isJsonObject(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

/** A tool call as the tool chunks carry it. */
export function toolResponse(
  id: string,
  name: string,
  status: 'streaming' | 'pending' | 'invoking' | 'done' | 'error' | 'cancelled',
  fields: { arguments?: unknown; partialArguments?: string; response?: unknown } = {},
) {
  return { id, toolCallId: id, tool: { name }, status, ...fields };
}

/** `next` after `step`: its state wins, the chunks add up. */
export function followedBy<State>(step: Translation<State>, next: Translation<State>): Translation<State> {
  return { state: next.state, chunks: [...step.chunks, ...next.chunks] };
}

/** A stream event standing in for part of a whole (non-streaming) response, and the response field it comes from. */
export interface StandIn {
  readonly event: unknown;
  readonly field: string;
}

/**
 * A whole response translated as the stream events that would have carried it, so it gives the
 * chunks its stream would; a refusal names the response's own field, not the stand-in's.
 */
export function translateStandIns<State>(
  translator: Translator<State>,
  state: State,
  standIns: readonly StandIn[],
): Translation<State> {
  return standIns.reduce<Translation<State>>(
    (step, { event, field }) => {
      try {
        return followedBy(step, translator.translate(step.state, event));
      } catch (error) {
        if (error instanceof DialectError) throw new DialectError(field, error.message);
        throw error;
      }
    },
    { state, chunks: [] },
  );
}

/**
 * How a response ends: one that ends in tool calls is a tool round, and the message stays open
 * for the round after the client runs the tools (ADR 0015); any other end completes the message.
 */
export function responseEnd(toolRound: boolean, response: Record<string, unknown>): UnnumberedChunk {
  return toolRound ? { type: 'llm_response_complete', response } : { type: 'block_complete', response };
}
