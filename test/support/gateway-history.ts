import { canonicalJson } from '#core';
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

