import { canonicalJson } from '../hashing/canonical-json.js';
import { openAiHistory } from '../history/history-builder.js';
import { activePath } from '../session/branch-tree.js';
import { decideSession, type Decision, type SessionCommand } from '../session/session-decider.js';
import { evolveSession, initialSessionState, type OpenSession, type SessionState } from '../session/session-events.js';
import { readModelCallRequest } from './provider-requests.js';

/**
 * Stateless Chat Completions calls placed in a session's tree: after every call, the history of
 * the active path is what the client sent plus the answer it got (the round-trip property), and
 * continuing, regenerating and editing shape the tree as the native API would.
 */
type ChatMessage = Record<string, unknown>;

/** The answer a scripted model gives, as Chat Completions stream chunks. */
function streamed(answer: { text?: string; toolCalls?: { id: string; name: string; arguments: string }[] }): unknown[] {
  const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({
    object: 'chat.completion.chunk',
    choices: [{ index: 0, delta, finish_reason: finish }],
  });
  const calls = answer.toolCalls ?? [];
  return [
    chunk({ role: 'assistant', content: '' }),
    ...(answer.text ? [chunk({ content: answer.text.slice(0, 3) }), chunk({ content: answer.text.slice(3) })] : []),
    ...calls.map((call, index) =>
      chunk({
        tool_calls: [
          { index, id: call.id, type: 'function', function: { name: call.name, arguments: call.arguments } },
        ],
      }),
    ),
    chunk({}, calls.length > 0 ? 'tool_calls' : 'stop'),
    '[DONE]',
  ];
}

function answered(answer: {
  text?: string;
  toolCalls?: { id: string; name: string; arguments: string }[];
}): ChatMessage {
  const calls = (answer.toolCalls ?? []).map((call) => ({
    id: call.id,
    type: 'function',
    function: { name: call.name, arguments: call.arguments },
  }));
  return { role: 'assistant', content: answer.text ?? null, ...(calls.length > 0 ? { tool_calls: calls } : {}) };
}

class GatewaySession {
  private state: SessionState = initialSessionState;
  private position = 0n;
  private calls = 0;

  constructor() {
    this.run({ type: 'open_session', sessionId: 's', title: null, metadata: {}, owner: 'subject:p', writers: [] });
  }

  /** One model call: the request's messages, then the answer streamed into the message the call was placed on. */
  call(messages: readonly ChatMessage[], answer: Parameters<typeof streamed>[0]): string {
    this.calls += 1;
    const request = readModelCallRequest('openai-chat', { model: 'm', messages });
    const placed = this.run({
      type: 'record_model_call',
      request,
      dialect: 'openai',
      answerMessageId: `answer-${this.calls}`,
    });
    const { messageId, nextEventSeq } = placed.answer!;
    this.run({
      type: 'append_dialect_events',
      messageId,
      dialect: 'openai',
      firstSeq: nextEventSeq,
      events: streamed(answer),
    });
    return messageId;
  }

  get session(): OpenSession {
    return this.state as OpenSession;
  }

  history() {
    const path = activePath(this.session.selectedRootId, this.session.messages);
    return openAiHistory(
      path.map((message) => ({ role: message.role, content: message.content, blocks: message.blocks.blocks })),
      { includeThinking: false },
    );
  }

  private run(command: SessionCommand): Decision {
    const decision = decideSession(command, this.state);
    for (const { event } of decision.events) {
      this.position += 1n;
      this.state = evolveSession(this.state, {
        ...event,
        position: this.position,
        recordedAt: '2026-01-01T00:00:00.000Z',
      });
    }
    return decision;
  }
}

/** Canonical JSON of a Chat Completions conversation; tool arguments compared as the JSON they hold. */
function canonical(messages: readonly ChatMessage[]): string {
  return canonicalJson(
    messages.map((message) => {
      const calls = message.tool_calls as { function: { arguments: string } }[] | undefined;
      const { tool_calls: _calls, ...rest } = message;
      return {
        ...rest,
        content: message.content ?? null,
        ...(calls
          ? {
              tool_calls: calls.map((call) => ({
                ...call,
                function: { ...call.function, arguments: JSON.parse(call.function.arguments) as unknown },
              })),
            }
          : {}),
      };
    }),
  );
}

function expectRoundTrip(
  session: GatewaySession,
  sent: readonly ChatMessage[],
  answer: Parameters<typeof answered>[0],
) {
  expect(canonical(session.history())).toBe(canonical([...sent, answered(answer)]));
}

const system = { role: 'system', content: 'Be brief.' };
const question = { role: 'user', content: 'What is the capital of France?' };

describe('model calls placed from stateless requests', () => {
  it('a first call makes the conversation and its answer; the next turn continues the active path', () => {
    const session = new GatewaySession();
    const first = { text: 'Paris.' };
    session.call([system, question], first);
    expectRoundTrip(session, [system, question], first);

    const followUp = [system, question, answered(first), { role: 'user', content: 'And of Italy?' }];
    const second = { text: 'Rome.' };
    session.call(followUp, second);
    expectRoundTrip(session, followUp, second);
    expect([...session.session.messages.values()].map((message) => message.role)).toEqual([
      'system',
      'user',
      'assistant',
      'user',
      'assistant',
    ]);
  });

  it('sending the same conversation again regenerates: a sibling answer, selected', () => {
    const session = new GatewaySession();
    const firstId = session.call([system, question], { text: 'Paris.' });
    const secondId = session.call([system, question], { text: 'It is Paris.' });
    expectRoundTrip(session, [system, question], { text: 'It is Paris.' });
    const [first, second] = [session.session.messages.get(firstId)!, session.session.messages.get(secondId)!];
    expect(second.parentId).toBe(first.parentId);
    expect(session.session.messages.get(first.parentId!)!.selectedChildId).toBe(secondId);
  });

  it('an edited user message branches where it differs, and going back to the first version selects it again', () => {
    const session = new GatewaySession();
    const first = session.call([system, question], { text: 'Paris.' });
    const edited = { role: 'user', content: 'What is the capital of Spain?' };
    session.call([system, edited], { text: 'Madrid.' });
    expectRoundTrip(session, [system, edited], { text: 'Madrid.' });
    expect([...session.session.messages.values()].filter((message) => message.role === 'system')).toHaveLength(1);

    const back = [system, question, answered({ text: 'Paris.' }), { role: 'user', content: 'Thanks' }];
    const reply = session.call(back, { text: 'You are welcome.' });
    expectRoundTrip(session, back, { text: 'You are welcome.' });
    expect(session.session.messages.get(reply)!.parentId).not.toBe(first);
    expect(session.session.messages.get(session.session.messages.get(reply)!.parentId!)!.parentId).toBe(first);
  });

  it('a conversation the ledger never saw is recorded as it is sent, past assistant turns included', () => {
    const session = new GatewaySession();
    const sent = [
      system,
      question,
      answered({ text: 'Paris.', toolCalls: [{ id: 'c1', name: 'lookup', arguments: '{"city": "Paris"}' }] }),
      { role: 'tool', tool_call_id: 'c1', content: '{"population":2100000}' },
      answered({ text: 'About 2.1 million people live there.' }),
      { role: 'user', content: 'Thanks' },
    ];
    session.call(sent, { text: 'Any time.' });
    expectRoundTrip(session, sent, { text: 'Any time.' });
  });
});
