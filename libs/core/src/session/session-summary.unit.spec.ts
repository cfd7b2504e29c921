import { parseChunks, type Chunk } from '../chunks/chunk-schemas.js';
import { decideSession, type SessionCommand } from './session-decider.js';
import { evolveSession, initialSessionState, type OpenSession, type SessionState } from './session-events.js';
import { summarizeSession } from './session-summary.js';
import { NO_TOKENS, reportedUsage, usageAfter } from './token-usage.js';

const chunk = (value: Record<string, unknown>): Chunk => parseChunks([{ seq: 1, ...value }])[0];
const end = (type: 'llm_response_complete' | 'block_complete', usage: unknown) => chunk({ type, response: { usage } });

/** The session after each command, decided and folded as the service does. */
function after(...commands: SessionCommand[]): OpenSession {
  let position = 0n;
  const state = commands.reduce<SessionState>((current, command) => {
    const { events } = decideSession(command, current);
    return events.reduce((folded, { event }) => {
      position += 1n;
      return evolveSession(folded, { ...event, position, recordedAt: '2026-01-01T00:00:00.000Z' });
    }, current);
  }, initialSessionState);
  if (state.status !== 'open') throw new Error('no session');
  return state;
}
const open: SessionCommand = {
  type: 'open_session',
  sessionId: 's1',
  title: null,
  metadata: {},
  owner: 'subject:owner',
  writers: [],
};
const create = (messageId: string, role: 'user' | 'assistant', model: string | null = null): SessionCommand => ({
  type: 'create_message',
  messageId,
  role,
  parentId: undefined,
  model,
  content: role === 'user' ? 'hi' : null,
});
const append = (messageId: string, values: Record<string, unknown>[], firstSeq = 1): SessionCommand => ({
  type: 'append_chunks',
  messageId,
  chunks: parseChunks(values.map((value, index) => ({ seq: firstSeq + index, ...value }))),
});

describe('token usage', () => {
  it('reads each provider vocabulary', () => {
    expect(reportedUsage({ prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 })).toEqual({
      promptTokens: 3,
      completionTokens: 4,
      totalTokens: 7,
    });
    // Anthropic counts cached input apart from input_tokens, and gives no total.
    expect(
      reportedUsage({ input_tokens: 5, cache_read_input_tokens: 10, cache_creation_input_tokens: 1, output_tokens: 2 }),
    ).toEqual({ promptTokens: 16, completionTokens: 2, totalTokens: 18 });
    expect(reportedUsage({ input_tokens: 5, output_tokens: 2, total_tokens: 7 })).toEqual({
      promptTokens: 5,
      completionTokens: 2,
      totalTokens: 7,
    });
    expect(reportedUsage({ inputTokens: 1, outputTokens: 2 })).toEqual({
      promptTokens: 1,
      completionTokens: 2,
      totalTokens: 3,
    });
  });

  it('ignores what is not a count', () => {
    expect(reportedUsage(undefined)).toBeUndefined();
    expect(reportedUsage('12')).toBeUndefined();
    expect(reportedUsage({ prompt_tokens: -1, completion_tokens: 1.5, total_tokens: '3' })).toBeUndefined();
    expect(reportedUsage({ prompt_tokens: 2, completion_tokens: -4 })).toEqual({
      promptTokens: 2,
      completionTokens: 0,
      totalTokens: 2,
    });
  });

  it('adds up translated calls, and takes Cherry’s block_complete as the whole message', () => {
    const round = end('llm_response_complete', { prompt_tokens: 10, completion_tokens: 2, total_tokens: 12 });
    const last = end('block_complete', { prompt_tokens: 20, completion_tokens: 3, total_tokens: 23 });
    const translated = usageAfter(usageAfter(NO_TOKENS, round, true), last, true);
    expect(translated).toEqual({ promptTokens: 30, completionTokens: 5, totalTokens: 35 });
    const cherry = usageAfter(usageAfter(NO_TOKENS, round, false), last, false);
    expect(cherry).toEqual({ promptTokens: 20, completionTokens: 3, totalTokens: 23 });
    expect(usageAfter(cherry, chunk({ type: 'text.delta', text: 'x' }), false)).toBe(cherry);
    expect(usageAfter(cherry, chunk({ type: 'block_complete' }), false)).toBe(cherry);
  });
});

describe('session summary', () => {
  it('is empty before any message', () => {
    expect(summarizeSession(after(open))).toEqual({
      messageCount: 0,
      model: null,
      status: 'empty',
      hasErrors: false,
      usage: NO_TOKENS,
    });
  });

  it('sums usage over messages, takes the newest model and status, and counts a failed tool as an error', () => {
    const usage = { usage: { prompt_tokens: 4, completion_tokens: 1, total_tokens: 5 } };
    const tool = { id: 't1', tool: { name: 'read' }, arguments: {}, status: 'error', response: 'boom' };
    const session = after(
      open,
      create('u1', 'user'),
      create('a1', 'assistant', 'model-a'),
      append('a1', [
        { type: 'mcp_tool_pending', responses: [{ ...tool, status: 'pending' }] },
        { type: 'mcp_tool_complete', responses: [tool] },
        { type: 'block_complete', response: usage },
      ]),
      // Recorded after the end: changes nothing, its usage included.
      append('a1', [{ type: 'block_complete', response: usage }], 4),
      create('u2', 'user'),
      create('a2', 'assistant'),
      append('a2', [{ type: 'llm_response_created' }, { type: 'block_complete', response: usage }]),
    );
    expect(summarizeSession(session)).toEqual({
      messageCount: 4,
      model: 'model-a',
      status: 'success',
      hasErrors: true,
      usage: { promptTokens: 8, completionTokens: 2, totalTokens: 10 },
    });
  });

  it('shows the newest message still streaming', () => {
    const session = after(
      open,
      create('u1', 'user'),
      create('a1', 'assistant', 'm'),
      append('a1', [{ type: 'text.start' }]),
    );
    expect(summarizeSession(session)).toMatchObject({ status: 'processing', hasErrors: false, model: 'm' });
  });
});
