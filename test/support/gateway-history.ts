import { canonicalJson } from '#core';
import { expect } from '@jest/globals';
import { eventually } from './gateway-fixture.js';
import type { LedgerUnderTest } from './ledger-http.js';

/**
 * The round-trip property of the recording gateway (issue 14 item 3): after a call, the session's
 * history in the client's format is what the client sent plus the answer it got. Each client test
 * says how its format reads "up to canonical JSON" (`canonical`); the history is read until the
 * read models show it (they follow the log), then compared.
 */
export type HistoryFormat = 'openai' | 'anthropic' | 'openai-responses';

export function historyPath(sessionId: string, format: HistoryFormat): string {
  return `/v1/sessions/${sessionId}/history?format=${format}&includeThinking=true`;
}

export async function expectHistory<T>(
  ledger: LedgerUnderTest,
  sessionId: string,
  format: HistoryFormat,
  canonical: (history: T) => string,
  expected: T,
): Promise<void> {
  const wanted = canonical(expected);
  const read = await eventually(
    () => ledger.request('GET', historyPath(sessionId, format)),
    (response) => response.status === 200 && canonical(response.body as T) === wanted,
  );
  expect(read.status).toBe(200);
  expect(canonical(read.body as T)).toBe(wanted);
}

/** A JSON value without its null, undefined and empty-array fields (an SDK's "absent"), keys sorted. */
export function withoutAbsent(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutAbsent);
  if (value === null || typeof value !== 'object') return value;
  const present = Object.entries(value).filter(
    ([, field]) => field !== null && field !== undefined && !(Array.isArray(field) && field.length === 0),
  );
  return Object.fromEntries(present.map(([key, field]) => [key, withoutAbsent(field)]));
}

export { canonicalJson };

/** A Chat Completions conversation up to canonical JSON: tool arguments as the JSON they hold, no absent fields. */
export function canonicalChat(messages: readonly unknown[]): string {
  return canonicalJson(
    messages.map((message) => {
      const { refusal: _refusal, tool_calls: calls, ...fields } = withoutAbsent(message) as Record<string, unknown>;
      if (!Array.isArray(calls)) return fields;
      const toolCalls = (calls as { id: string; function: { name: string; arguments: string } }[]).map((call) => ({
        id: call.id,
        type: 'function',
        function: { name: call.function.name, arguments: JSON.parse(call.function.arguments) as unknown },
      }));
      return { ...fields, tool_calls: toolCalls };
    }),
  );
}

export interface ResponsesConversation {
  readonly instructions?: string | null;
  readonly input: string | readonly unknown[];
}

/**
 * A Responses conversation up to canonical JSON, and how echoed output items are read. A client
 * sends a response's output items back as they came, with the `id` and `status` the provider gave
 * its message and function_call items and `annotations`/`logprobs` on output text: they identify
 * and describe the items, they are not what the conversation says, and the history has no place
 * for them. So message and function_call items drop `id` and `status`, a message's content is its
 * parts' types and texts (a string being the one part it stands for), function arguments compare
 * as the JSON they hold, a string input is the user message it stands for, and null or empty
 * fields are absent. Text, calls, results and reasoning items (whole: their id, summary and
 * encrypted content are what the provider checks) are compared as they are.
 */
export function canonicalResponses({ instructions, input }: ResponsesConversation): string {
  const items = typeof input === 'string' ? [{ role: 'user', content: input }] : input;
  return canonicalJson(withoutAbsent({ instructions, input: items.map(comparableItem) }));
}

function comparableItem(item: unknown): unknown {
  const { id: _id, status: _status, ...fields } = item as Record<string, unknown>;
  switch (fields.type ?? 'message') {
    case 'message': {
      const textType = fields.role === 'assistant' ? 'output_text' : 'input_text';
      const content = fields.content as string | { type: string; text?: string }[];
      const parts = typeof content === 'string' ? [{ type: textType, text: content }] : content;
      return { ...fields, type: 'message', content: parts.map(({ type, text }) => ({ type, text })) };
    }
    case 'function_call':
      return { ...fields, arguments: JSON.parse(fields.arguments as string) as unknown };
    default:
      return item;
  }
}
