import { activePath } from '../session/branch-tree.js';
import { decideSession, type SessionCommand } from '../session/session-decider.js';
import { evolveSession, initialSessionState, type OpenSession, type SessionState } from '../session/session-events.js';
import { readModelCallRequest } from './provider-requests.js';

/**
 * Provider requests read into turns. A Responses client sends a response's output items back as
 * they came (reasoning, message, every function_call), then the calls' outputs: that is one round,
 * so a tool loop continues the message that recorded the response instead of branching.
 */
const reasoning = {
  id: 'rs_1',
  type: 'reasoning',
  summary: [{ type: 'summary_text', text: 'Why.' }],
  encrypted_content: 'e',
};
const message = {
  id: 'msg_1',
  type: 'message',
  role: 'assistant',
  status: 'completed',
  content: [{ type: 'output_text', text: 'Checking.', annotations: [] }],
};
const call = (callId: string) => ({
  id: `fc_${callId}`,
  type: 'function_call',
  status: 'completed',
  call_id: callId,
  name: 'weather',
  arguments: `{"city":"${callId}"}`,
});
const output = (callId: string) => ({ type: 'function_call_output', call_id: callId, output: `sky over ${callId}` });
const user = { role: 'user', content: 'Weather in Paris and Rome?' };
const firstResponse = [reasoning, message, call('paris'), call('rome')];

describe('readModelCallRequest (openai-responses)', () => {
  it("reads one response's output items, parallel calls and all, as one round the outputs after them answer", () => {
    const { turns } = readModelCallRequest('openai-responses', {
      model: 'm',
      input: [user, ...firstResponse, output('paris'), output('rome')],
    });
    expect(turns).toHaveLength(2);
    const [round, ...more] = (turns[1] as Extract<(typeof turns)[number], { role: 'assistant' }>).rounds;
    expect(more).toEqual([]);
    expect(round.text).toBe('Checking.');
    expect(round.thinking.map((part) => part.item)).toEqual([reasoning]);
    expect(round.tools.map((tool) => [tool.id, tool.result?.content])).toEqual([
      ['paris', 'sky over paris'],
      ['rome', 'sky over rome'],
    ]);
  });

  it('opens the next round with the first output item after the outputs', () => {
    const next = { ...message, id: 'msg_2', content: [{ type: 'output_text', text: 'Both sunny.' }] };
    const { turns } = readModelCallRequest('openai-responses', {
      model: 'm',
      input: [user, call('paris'), output('paris'), call('rome'), output('rome'), next],
    });
    const rounds = (turns[1] as Extract<(typeof turns)[number], { role: 'assistant' }>).rounds;
    expect(rounds.map((round) => [round.text, round.tools.map((tool) => tool.id)])).toEqual([
      ['', ['paris']],
      ['', ['rome']],
      ['Both sunny.', []],
    ]);
  });

  it("places the tool loop's second call on the message that recorded the first response", () => {
    let state: SessionState = initialSessionState;
    let position = 0n;
    const run = (command: SessionCommand) => {
      const decision = decideSession(command, state);
      for (const { event } of decision.events) {
        position += 1n;
        state = evolveSession(state, { ...event, position, recordedAt: '2026-01-01T00:00:00.000Z' });
      }
      return decision.answer!;
    };
    const place = (input: unknown[], answerMessageId: string) =>
      run({
        type: 'record_model_call',
        request: readModelCallRequest('openai-responses', { model: 'm', input }),
        dialect: 'openai-responses',
        answerMessageId,
      });
    run({
      type: 'open_session',
      sessionId: 's',
      title: null,
      metadata: {},
      owner: 'subject:p',
      writers: [],
    });
    const first = place([user], 'answer-1');
    const whole = { object: 'response', status: 'completed', output: firstResponse };
    run({
      type: 'append_dialect_events',
      messageId: first.messageId,
      dialect: 'openai-responses',
      firstSeq: first.nextEventSeq,
      events: [whole],
    });

    const second = place([user, ...firstResponse, output('paris'), output('rome')], 'answer-2');
    expect(second.messageId).toBe('answer-1');
    const session = state as OpenSession;
    expect(activePath(session.selectedRootId, session.messages).map((each) => each.id)).toEqual([
      expect.any(String),
      'answer-1',
    ]);
    expect([...session.messages.values()]).toHaveLength(2);
  });
});

describe('readModelCallRequest: lists of objects holding something else', () => {
  // Each answered 500 where a member of the item was read.
  it.each([
    ['openai-responses', { model: 'm', input: [{ type: 'reasoning', summary: [null] }] }, 'input[0].summary[0]'],
    ['openai-chat', { model: 'm', messages: [{ role: 'assistant', tool_calls: [null] }] }, 'messages[0].tool_calls[0]'],
    ['openai-chat', { model: 'm', messages: [{ role: 'assistant', tool_calls: [[]] }] }, 'messages[0].tool_calls[0]'],
    [
      'anthropic-messages',
      { model: 'm', max_tokens: 1, messages: [{ role: 'user', content: [7] }] },
      'messages[0].content[0]',
    ],
  ] as const)('%s, case %#: refused, naming the item', (protocol, body, field) => {
    expect(() => readModelCallRequest(protocol, body)).toThrow(expect.objectContaining({ field }));
  });
});
