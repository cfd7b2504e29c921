import { parseChunks, type Chunk } from '../chunks/chunk-schemas.js';
import { RecordedSession } from '../testing/recorded-session.js';
import type { SessionCommand } from './session-decider.js';
import { sessionChanges } from './session-changes.js';
import type { OpenSession } from './session-events.js';
import { summarizeChanges, summarizeSession, type SessionTally } from './session-summary.js';
import { NO_TOKENS, reportedUsage, usageAfter } from './token-usage.js';

const chunk = (value: Record<string, unknown>): Chunk => parseChunks([{ seq: 1, ...value }])[0];
const end = (type: 'llm_response_complete' | 'block_complete', usage: unknown) => chunk({ type, response: { usage } });

/** The session after each command, decided and folded as the service does. */
function after(...commands: SessionCommand[]): OpenSession {
  const session = new RecordedSession();
  for (const command of commands) session.take(command);
  if (session.state.status !== 'open') throw new Error('no session');
  return session.state;
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

  it('holds every count at 2^53 - 1, however many calls report it (a bigint column took the sum of 1,100)', () => {
    const most = Number.MAX_SAFE_INTEGER;
    expect(reportedUsage({ input_tokens: most, cache_read_input_tokens: most, output_tokens: most })).toEqual({
      promptTokens: most,
      completionTokens: most,
      totalTokens: most,
    });
    let usage = NO_TOKENS;
    for (let call = 0; call < 1_100; call += 1)
      usage = usageAfter(usage, end('llm_response_complete', { prompt_tokens: most, completion_tokens: 1 }), true);
    expect(usage).toEqual({ promptTokens: most, completionTokens: 1_100, totalTokens: most });
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
      erroredMessages: 0,
      modelOrdinal: 0,
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
      erroredMessages: 1,
      modelOrdinal: 2,
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

describe('session summary from what changed', () => {
  /**
   * A session taken batch by batch as the projection takes it: each batch's summary from the last one
   * and the change set (`RecordedSession.take`: a batch holds the events of every command given).
   */
  function heldSession() {
    const session = new RecordedSession();
    let summary: SessionTally | undefined;
    return {
      take(...commands: SessionCommand[]): { incremental: SessionTally; whole: SessionTally } {
        const { previous, read } = session.take(...commands);
        const changes = sessionChanges(previous, read);
        if (changes) summary = summary ? summarizeChanges(summary, changes) : summarizeSession(changes.session);
        return { incremental: summary!, whole: summarizeSession(read as OpenSession) };
      },
    };
  }

  it('equals the summary over every message after every batch: models, usage, errors, new threads and selections', () => {
    const session = heldSession();
    session.take(open);
    const usage = (tokens: number) => ({
      usage: { prompt_tokens: tokens, completion_tokens: 1, total_tokens: tokens + 1 },
    });
    const failedTool = { id: 't', tool: { name: 'read' }, arguments: {}, status: 'error', response: 'boom' };
    let compared = 0;
    const seqs = new Map<string, number>();
    const chunkOf = (messageId: string, value: Record<string, unknown>) => {
      const seq = (seqs.get(messageId) ?? 0) + 1;
      seqs.set(messageId, seq);
      return append(messageId, [value], seq);
    };
    for (let turn = 0; turn < 120; turn += 1) {
      const answer = `a${turn}`;
      const answerChunk = (value: Record<string, unknown>) => chunkOf(answer, value);
      const question = create(`u${turn}`, 'user');
      const commands: SessionCommand[] = [
        { ...question, parentId: turn % 9 === 0 ? null : undefined } as SessionCommand,
        // Some answers name no model: the summary keeps the newest that did.
        create(answer, 'assistant', turn % 3 === 0 ? null : `model-${turn % 5}`),
        answerChunk({ type: 'text.delta', text: 'one' }),
      ];
      // Every seventh answer's tool fails: an error the session keeps; every eleventh stays streaming.
      if (turn % 7 === 3)
        commands.push(
          answerChunk({ type: 'mcp_tool_pending', responses: [{ ...failedTool, status: 'pending' }] }),
          answerChunk({ type: 'mcp_tool_complete', responses: [failedTool] }),
        );
      if (turn % 11 !== 5) commands.push(answerChunk({ type: 'block_complete', response: usage(turn) }));
      // While this answer streams, the one before it records its usage late: an older message changes, not the newest.
      else commands.push(chunkOf(`a${turn - 1}`, { type: 'block_complete', response: usage(2 * turn) }));
      if (turn % 13 === 12)
        commands.push({
          type: 'select_branch',
          parentId: null,
          childId: `u${turn - 3 - ((turn - 3) % 9)}`,
          eventId: `00000000-0000-4000-8000-${String(turn).padStart(12, '0')}`,
        });
      for (const command of commands) {
        const { incremental, whole } = session.take(command);
        expect(incremental).toEqual(whole);
        compared += 1;
      }
    }
    // The comparison covered sessions with errors, several models and usage: it would catch a wrong sum or pick.
    const last = session.take(create('u-last', 'user'));
    expect(last.whole).toMatchObject({ hasErrors: true, model: 'model-4', messageCount: 241 });
    expect(last.whole.usage.promptTokens).toBeGreaterThan(5_000);
    expect(compared).toBeGreaterThan(400);
  });

  it('clears the error once the failed tool call of the only message in error completes after all', () => {
    const session = heldSession();
    session.take(open);
    const tool = { id: 't1', tool: { name: 'read' }, arguments: {} };
    const seen = [
      session.take(create('a1', 'assistant', 'm')),
      session.take(append('a1', [{ type: 'mcp_tool_pending', responses: [{ ...tool, status: 'pending' }] }])),
      session.take(append('a1', [{ type: 'mcp_tool_complete', responses: [{ ...tool, status: 'error' }] }], 2)),
      session.take(append('a1', [{ type: 'mcp_tool_complete', responses: [{ ...tool, status: 'done' }] }], 3)),
    ];
    for (const { incremental, whole } of seen) expect(incremental).toEqual(whole);
    expect(seen.map(({ incremental }) => incremental.hasErrors)).toEqual([false, false, true, false]);
  });

  it('sums every message again when a count reaches the integers a double holds exactly, where it is held', () => {
    const session = heldSession();
    session.take(open);
    session.take(create('a1', 'assistant', 'm'));
    const huge = Number.MAX_SAFE_INTEGER - 10;
    session.take(
      append('a1', [{ type: 'block_complete', response: { usage: { prompt_tokens: huge, completion_tokens: 0 } } }]),
    );
    session.take(create('a2', 'assistant', 'm'));
    const { incremental, whole } = session.take(
      append('a2', [{ type: 'block_complete', response: { usage: { prompt_tokens: 100, completion_tokens: 0 } } }]),
    );
    expect(whole.usage.promptTokens).toBe(Number.MAX_SAFE_INTEGER);
    expect(incremental).toEqual(whole);
  });

  it('does not drift once a sum is past exact: an older message’s usage that changes is summed again with the rest', () => {
    const session = heldSession();
    session.take(open);
    // Each model call of a message adds its usage until the message ends; a1 never ends here.
    const called = (messageId: string, promptTokens: number, seq = 1) =>
      append(messageId, [{ type: 'llm_response_complete', response: { usage: { prompt_tokens: promptTokens } } }], seq);
    for (const [messageId, promptTokens] of [
      ['a1', 1],
      ['a2', Number.MAX_SAFE_INTEGER],
      ['a3', 1],
    ] as const) {
      session.take(create(messageId, 'assistant', 'm'));
      session.take(called(messageId, promptTokens));
    }
    // a1 now stands at 3: 3 + (2^53 - 1) + 1 is held at 2^53 - 1; a1 taken off the held sum and put back, 2^53 - 2.
    const { incremental, whole } = session.take(called('a1', 2, 2));
    expect(whole.usage.promptTokens).toBe(Number.MAX_SAFE_INTEGER);
    expect(incremental).toEqual(whole);
    // a2 ends reporting 5 for the whole message: the sum is exact again (3 + 5 + 1), not (2^53 - 1) - (2^53 - 1) + 5.
    const ended = session.take(
      append('a2', [{ type: 'block_complete', response: { usage: { prompt_tokens: 5 } } }], 2),
    );
    expect(ended.whole.usage.promptTokens).toBe(9);
    expect(ended.incremental).toEqual(ended.whole);
  });

  it('does not drift within a batch that leaves exact integers and comes back', () => {
    const session = heldSession();
    session.take(open);
    const called = (messageId: string, promptTokens: number, seq = 1) =>
      append(messageId, [{ type: 'llm_response_complete', response: { usage: { prompt_tokens: promptTokens } } }], seq);
    session.take(create('a1', 'assistant', 'm'), called('a1', 1));
    session.take(create('a2', 'assistant', 'm'), called('a2', Number.MAX_SAFE_INTEGER - 10));
    // One batch: a1 adds 13 (the running sum passes 2^53 and rounds), then a2 ends reporting 5 for the whole message.
    const { incremental, whole } = session.take(
      called('a1', 13, 2),
      append('a2', [{ type: 'block_complete', response: { usage: { prompt_tokens: 5 } } }], 2),
    );
    expect(whole.usage.promptTokens).toBe(14 + 5);
    expect(incremental).toEqual(whole);
  });
});
