import { parseChunks, type Chunk } from '../chunks/chunk-schemas.js';
import { decideSession, SessionError, type Decision, type SessionCommand } from './session-decider.js';
import { evolveSession, initialSessionState, type SessionEvent, type SessionState } from './session-events.js';

function stateOf(...events: SessionEvent[]): SessionState {
  return events.reduce<SessionState>((current, event, index) => evolveSession(current, { ...event, position: BigInt(index + 1), recordedAt: '2026-01-01T00:00:00.000Z' }), initialSessionState);
}

function given(...events: SessionEvent[]) {
  const state = stateOf(...events);
  return {
    when(command: SessionCommand) {
      const run = () => decideSession(command, state);
      return {
        then: (check: (decision: Decision) => void) => check(run()),
        thenThrows(code: SessionError['code'], field?: string) {
          let thrown: unknown;
          try {
            run();
          } catch (error) {
            thrown = error;
          }
          expect(thrown).toBeInstanceOf(SessionError);
          expect(thrown).toMatchObject({ code, ...(field ? { field } : {}) });
        },
      };
    },
  };
}

const opened: SessionEvent = { type: 'session.opened', data: { sessionId: 's1', title: null, metadata: {} } };
const message = (messageId: string, role: 'user' | 'assistant', parentId: string | null): SessionEvent => ({ type: 'message.created', data: { messageId, role, parentId, model: null, content: null } });
const chunks = (...values: Record<string, unknown>[]): Chunk[] => parseChunks(values.map((value, index) => ({ seq: index + 1, ...value })));
const recorded = (messageId: string, list: Chunk[]) => given(opened, message('u1', 'user', null), message(messageId, 'assistant', 'u1')).when({ type: 'append_chunks', messageId, chunks: list });

describe('session decider', () => {
  it('opens a session once', () => {
    given().when({ type: 'open_session', sessionId: 's1', title: 'T', metadata: {} }).then(({ events }) => expect(events.map((e) => e.event.type)).toEqual(['session.opened']));
    given(opened).when({ type: 'open_session', sessionId: 's1', title: null, metadata: {} }).thenThrows('session_exists', 'id');
  });

  it('attaches a message without parentId to the latest message, and null makes a top-level one', () => {
    given(opened, message('u1', 'user', null)).when({ type: 'create_message', messageId: 'a1', role: 'assistant', parentId: undefined, model: null, content: null }).then(({ parentId }) => expect(parentId).toBe('u1'));
    given(opened, message('u1', 'user', null)).when({ type: 'create_message', messageId: 'u2', role: 'user', parentId: null, model: null, content: 'hi' }).then(({ parentId }) => expect(parentId).toBeNull());
    given(opened).when({ type: 'create_message', messageId: 'a1', role: 'assistant', parentId: 'nope', model: null, content: null }).thenThrows('parent_not_found', 'parentId');
    given(opened, message('u1', 'user', null)).when({ type: 'create_message', messageId: 'u1', role: 'user', parentId: null, model: null, content: null }).thenThrows('message_exists', 'id');
    given().when({ type: 'create_message', messageId: 'u1', role: 'user', parentId: null, model: null, content: null }).thenThrows('session_not_found');
  });

  it('records chunks with deterministic ids and text deltas as suffixes', () => {
    recorded('a1', chunks({ type: 'text.start' }, { type: 'text.delta', text: 'Hel' }, { type: 'text.delta', text: 'Hello' })).then(({ events, duplicateSeqs }) => {
      expect(events.map((e) => e.event.type)).toEqual(['chunk.text.start', 'chunk.text.delta', 'chunk.text.delta']);
      expect(events[2]!.event.data).toEqual({ messageId: 'a1', seq: 3, type: 'text.delta', append: 'lo' });
      expect(duplicateSeqs).toEqual([]);
      expect(new Set(events.map((e) => e.id)).size).toBe(3);
    });
  });

  it('reports a retried batch as duplicates, refuses a gap naming the expected seq, and a repeat with other content', () => {
    const first = chunks({ type: 'text.start' }, { type: 'text.delta', text: 'Hi' });
    const state = [opened, message('u1', 'user', null), message('a1', 'assistant', 'u1')];
    const decision = decideSession({ type: 'append_chunks', messageId: 'a1', chunks: first }, stateOf(...state));
    const after = [...state, ...decision.events.map((e) => e.event)];
    given(...after).when({ type: 'append_chunks', messageId: 'a1', chunks: first }).then(({ events, duplicateSeqs }) => {
      expect(events).toEqual([]);
      expect(duplicateSeqs).toEqual([1, 2]);
    });
    given(...after).when({ type: 'append_chunks', messageId: 'a1', chunks: parseChunks([{ seq: 4, type: 'text.complete', text: 'Hi' }]) }).thenThrows('seq_gap', 'chunks[0].seq');
    given(...after).when({ type: 'append_chunks', messageId: 'a1', chunks: parseChunks([{ seq: 2, type: 'text.delta', text: 'Ho' }]) }).thenThrows('seq_conflict', 'chunks[0].seq');
    given(...after).when({ type: 'append_chunks', messageId: 'a1', chunks: parseChunks([{ seq: 2, type: 'text.delta', text: 'Hi' }, { seq: 3, type: 'text.complete', text: 'Hi' }]) }).then(({ events, duplicateSeqs }) => {
      expect(duplicateSeqs).toEqual([2]);
      expect(events.map((e) => e.event.type)).toEqual(['chunk.text.complete']);
    });
  });

  it('takes chunks only for assistant messages that exist', () => {
    given(opened, message('u1', 'user', null)).when({ type: 'append_chunks', messageId: 'u1', chunks: chunks({ type: 'text.start' }) }).thenThrows('not_assistant');
    given(opened).when({ type: 'append_chunks', messageId: 'zz', chunks: chunks({ type: 'text.start' }) }).thenThrows('message_not_found');
  });
});

