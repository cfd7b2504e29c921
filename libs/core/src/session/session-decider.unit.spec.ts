import { parseChunks, type Chunk } from '../chunks/chunk-schemas.js';
import { decideSession, SessionError, type Decision, type SessionCommand } from './session-decider.js';
import { activePath, branchTree } from './branch-tree.js';
import { IGNORED_CHUNK_CASES, pendingToolCalls } from '../testing/ignored-chunks.js';
import { MAX_MESSAGE_BLOCKS } from '../blocks/block-rules.js';
import {
  DIGEST_NOT_KEPT,
  evolveSession,
  forkSession,
  initialSessionState,
  mayWrite,
  type OpenSession,
  type SessionEvent,
  type SessionState,
} from './session-events.js';

function stateOf(...events: SessionEvent[]): SessionState {
  return events.reduce<SessionState>(
    (current, event, index) =>
      evolveSession(current, { ...event, position: BigInt(index + 1), recordedAt: '2026-01-01T00:00:00.000Z' }),
    initialSessionState,
  );
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
const message = (messageId: string, role: 'user' | 'assistant', parentId: string | null): SessionEvent => ({
  type: 'message.created',
  data: { messageId, role, parentId, model: null, content: null },
});
const chunks = (...values: Record<string, unknown>[]): Chunk[] =>
  parseChunks(values.map((value, index) => ({ seq: index + 1, ...value })));
const recorded = (messageId: string, list: Chunk[]) =>
  given(opened, message('u1', 'user', null), message(messageId, 'assistant', 'u1')).when({
    type: 'append_chunks',
    messageId,
    chunks: list,
  });

describe('session decider', () => {
  it('opens a session once; the same open again is a repeat, another with that id a conflict naming the field', () => {
    given()
      .when({
        type: 'open_session',
        sessionId: 's1',
        title: 'T',
        metadata: {},
        owner: 'subject:alice',
        writers: ['subject:bob'],
      })
      .then(({ events }) => {
        expect(events.map((e) => e.event)).toEqual([
          {
            type: 'session.opened',
            data: { sessionId: 's1', title: 'T', metadata: {}, owner: 'subject:alice', writers: ['subject:bob'] },
          },
        ]);
      });
    const open = { type: 'open_session', sessionId: 's1', title: null, metadata: {}, owner: 'subject:alice' } as const;
    given(opened)
      .when({ ...open, writers: [] })
      .then((decision) => expect(decision).toEqual({ events: [], duplicateSeqs: [], repeatOf: { position: 1n } }));
    given(opened)
      .when({ ...open, title: 'other', writers: [] })
      .thenThrows('session_exists', 'title');
    given(opened)
      .when({ ...open, metadata: { a: 1 }, writers: ['subject:bob'] })
      .thenThrows('session_exists', 'metadata');
    given(opened)
      .when({ ...open, writers: ['subject:bob'] })
      .thenThrows('session_exists', 'writers');
  });

  it('grants writers once each; the owner and who may write already add nothing', () => {
    const owned: SessionEvent = {
      type: 'session.opened',
      data: { sessionId: 's1', title: null, metadata: {}, owner: 'subject:alice', writers: ['subject:bob'] },
    };
    given(owned)
      .when({ type: 'grant_writers', writers: ['subject:alice', 'subject:bob', 'subject:carol'], eventId: 'e1' })
      .then(({ events }) => {
        expect(events).toEqual([
          { id: 'e1', event: { type: 'session.writers_granted', data: { writers: ['subject:carol'] } } },
        ]);
      });
    given(owned)
      .when({ type: 'grant_writers', writers: ['subject:bob'], eventId: 'e1' })
      .then(({ events }) => expect(events).toEqual([]));
    const state = stateOf(owned, {
      type: 'session.writers_granted',
      data: { writers: ['subject:carol'] },
    }) as OpenSession;
    expect(
      ['subject:alice', 'subject:bob', 'subject:carol', 'subject:mallory'].map((subject) => mayWrite(state, subject)),
    ).toEqual([true, true, true, false]);
  });

  it('attaches a message without parentId to the active leaf, and null makes a top-level one', () => {
    given(opened, message('u1', 'user', null))
      .when({
        type: 'create_message',
        messageId: 'a1',
        role: 'assistant',
        parentId: undefined,
        model: null,
        content: null,
      })
      .then(({ parentId }) => expect(parentId).toBe('u1'));
    given(opened, message('u1', 'user', null))
      .when({ type: 'create_message', messageId: 'u2', role: 'user', parentId: null, model: null, content: 'hi' })
      .then(({ parentId }) => expect(parentId).toBeNull());
    given(opened)
      .when({
        type: 'create_message',
        messageId: 'a1',
        role: 'assistant',
        parentId: 'nope',
        model: null,
        content: null,
      })
      .thenThrows('parent_not_found', 'parentId');
    const again = { type: 'create_message', messageId: 'u1', role: 'user', model: null, content: null } as const;
    for (const parentId of [null, undefined])
      given(opened, message('u1', 'user', null))
        .when({ ...again, parentId })
        .then((decision) => expect(decision).toMatchObject({ events: [], parentId: null, repeatOf: { position: 2n } }));
    given(opened, message('u1', 'user', null))
      .when({ ...again, role: 'system', content: 'x', parentId: null })
      .thenThrows('message_exists', 'role');
    given(opened, message('u1', 'user', null))
      .when({ ...again, content: 'x', parentId: null })
      .thenThrows('message_exists', 'content');
    given(opened, message('u0', 'user', null), message('u1', 'user', null))
      .when({ ...again, parentId: 'u0' })
      .thenThrows('message_exists', 'parentId');
    given(opened, message('u1', 'user', null))
      .when({ ...again, parentId: null, model: 'm' })
      .thenThrows('message_exists', 'model');
    given()
      .when({ type: 'create_message', messageId: 'u1', role: 'user', parentId: null, model: null, content: null })
      .thenThrows('session_not_found');
  });

  it('records chunks with deterministic ids and text deltas as suffixes', () => {
    recorded(
      'a1',
      chunks({ type: 'text.start' }, { type: 'text.delta', text: 'Hel' }, { type: 'text.delta', text: 'Hello' }),
    ).then(({ events, duplicateSeqs }) => {
      expect(events.map((e) => e.event.type)).toEqual(['chunk.text.start', 'chunk.text.delta', 'chunk.text.delta']);
      expect(events[2].event.data).toEqual({ messageId: 'a1', seq: 3, type: 'text.delta', append: 'lo' });
      expect(duplicateSeqs).toEqual([]);
      expect(new Set(events.map((e) => e.id)).size).toBe(3);
    });
  });

  it('reports a retried batch as duplicates, refuses a gap naming the expected seq, and a repeat with other content', () => {
    const first = chunks({ type: 'text.start' }, { type: 'text.delta', text: 'Hi' });
    const state = [opened, message('u1', 'user', null), message('a1', 'assistant', 'u1')];
    const decision = decideSession({ type: 'append_chunks', messageId: 'a1', chunks: first }, stateOf(...state));
    const after = [...state, ...decision.events.map((e) => e.event)];
    given(...after)
      .when({ type: 'append_chunks', messageId: 'a1', chunks: first })
      .then(({ events, duplicateSeqs }) => {
        expect(events).toEqual([]);
        expect(duplicateSeqs).toEqual([1, 2]);
      });
    given(...after)
      .when({
        type: 'append_chunks',
        messageId: 'a1',
        chunks: parseChunks([{ seq: 4, type: 'text.complete', text: 'Hi' }]),
      })
      .thenThrows('seq_gap', 'chunks[0].seq');
    given(...after)
      .when({
        type: 'append_chunks',
        messageId: 'a1',
        chunks: parseChunks([{ seq: 2, type: 'text.delta', text: 'Ho' }]),
      })
      .thenThrows('seq_conflict', 'chunks[0].seq');
    given(...after)
      .when({
        type: 'append_chunks',
        messageId: 'a1',
        chunks: parseChunks([
          { seq: 2, type: 'text.delta', text: 'Hi' },
          { seq: 3, type: 'text.complete', text: 'Hi' },
        ]),
      })
      .then(({ events, duplicateSeqs }) => {
        expect(duplicateSeqs).toEqual([2]);
        expect(events.map((e) => e.event.type)).toEqual(['chunk.text.complete']);
      });
  });

  it('compares a retried seq with the chunk as posted, though the log holds its text as a suffix', () => {
    const posted = chunks(
      { type: 'text.start' },
      { type: 'text.delta', text: 'Hel' },
      { type: 'text.delta', text: 'Hello' },
    );
    const state = [opened, message('u1', 'user', null), message('a1', 'assistant', 'u1')];
    const decision = decideSession({ type: 'append_chunks', messageId: 'a1', chunks: posted }, stateOf(...state));
    expect(decision.events[2].event.data).toMatchObject({ append: 'lo' });
    const after = [...state, ...decision.events.map((e) => e.event)];
    const retry = (text: string): SessionCommand => ({
      type: 'append_chunks',
      messageId: 'a1',
      chunks: parseChunks([{ seq: 3, type: 'text.delta', text }]),
    });
    given(...after)
      .when(retry('Hello'))
      .then(({ events, duplicateSeqs }) =>
        expect({ events, duplicateSeqs }).toEqual({ events: [], duplicateSeqs: [3] }),
      );
    for (const other of ['lo', 'Help', 'Hello '])
      given(...after)
        .when(retry(other))
        .thenThrows('seq_conflict');
  });

  it("stores a streaming tool call's arguments as what they add, and compares a retry with the chunk as posted", () => {
    const streaming = (partialArguments: string, id = 'call_1') => ({
      type: 'mcp_tool_streaming',
      responses: [{ id, tool: { name: 'write' }, status: 'streaming', partialArguments }],
    });
    const posted = chunks(
      streaming('{"pa'),
      streaming('{"path":'),
      streaming('{"x', 'call_2'),
      streaming('{"path":"a"}'),
    );
    const state = [opened, message('u1', 'user', null), message('a1', 'assistant', 'u1')];
    const decision = decideSession({ type: 'append_chunks', messageId: 'a1', chunks: posted }, stateOf(...state));
    const call = (id: string, fields: Record<string, unknown> = {}) => ({
      id,
      tool: { name: 'write' },
      status: 'streaming',
      ...fields,
    });
    const stored = (seq: number, response: unknown, appendArguments?: string[]) => ({
      messageId: 'a1',
      seq,
      type: 'mcp_tool_streaming',
      responses: [response],
      ...(appendArguments ? { appendArguments } : {}),
    });
    expect(decision.events.map((e) => e.event.data)).toEqual([
      stored(1, call('call_1', { partialArguments: '{"pa' })),
      stored(2, call('call_1'), ['th":']),
      stored(3, call('call_2', { partialArguments: '{"x' })),
      stored(4, call('call_1'), ['"a"}']),
    ]);
    const after = [...state, ...decision.events.map((e) => e.event)];
    const folded = stateOf(...after);
    const tools = folded.status === 'open' ? folded.messages.get('a1')!.blocks.blocks : [];
    const raw = (block: (typeof tools)[number]) => block.metadata?.rawMcpToolResponse as { partialArguments: string };
    expect(tools.map((block) => raw(block).partialArguments)).toEqual(['{"path":"a"}', '{"x']);
    const retry = (partialArguments: string): SessionCommand => ({
      type: 'append_chunks',
      messageId: 'a1',
      chunks: parseChunks([{ seq: 4, ...streaming(partialArguments) }]),
    });
    given(...after)
      .when(retry('{"path":"a"}'))
      .then(({ events, duplicateSeqs }) =>
        expect({ events, duplicateSeqs }).toEqual({ events: [], duplicateSeqs: [4] }),
      );
    given(...after)
      .when(retry('"a"}'))
      .thenThrows('seq_conflict');
  });

  it('reads back a posted response holding an `appendArguments` member as posted: the log marks its own at the top', () => {
    const response = (partialArguments: string, appendArguments: string) => ({
      id: 'call_1',
      tool: { name: 'write' },
      status: 'streaming',
      partialArguments,
      appendArguments,
    });
    const posted = chunks(
      { type: 'mcp_tool_streaming', responses: [response('{"p', 'EVIL')] },
      { type: 'mcp_tool_streaming', responses: [response('{"path"', 'WORSE')] },
    );
    const state = [opened, message('u1', 'user', null), message('a1', 'assistant', 'u1')];
    const decision = decideSession({ type: 'append_chunks', messageId: 'a1', chunks: posted }, stateOf(...state));
    const folded = stateOf(...state, ...decision.events.map((e) => e.event));
    const [block] = folded.status === 'open' ? folded.messages.get('a1')!.blocks.blocks : [];
    expect(block.metadata?.rawMcpToolResponse).toEqual(response('{"path"', 'WORSE'));
  });

  it('tracks the arguments of at most 32 streaming calls of a message, storing the others whole; forgets them at its end', () => {
    const streaming = (id: string, partialArguments: string) => ({
      type: 'mcp_tool_streaming',
      responses: [{ id, tool: { name: 't' }, status: 'streaming', partialArguments }],
    });
    const ids = Array.from({ length: 40 }, (_, index) => `call_${index}`);
    const posted = chunks(...ids.map((id) => streaming(id, '{')), ...ids.map((id) => streaming(id, '{"a":1}')), {
      type: 'block_complete',
    });
    const state = [opened, message('u1', 'user', null), message('a1', 'assistant', 'u1')];
    const decision = decideSession({ type: 'append_chunks', messageId: 'a1', chunks: posted }, stateOf(...state));
    const appended = decision.events.map((e) => (e.event.data as { appendArguments?: string[] }).appendArguments);
    expect(appended.slice(40, 80)).toEqual([...Array(32).fill(['"a":1}']), ...Array(8).fill(undefined)]);
    const atEnd = stateOf(...state, ...decision.events.map((e) => e.event));
    const message_ = atEnd.status === 'open' ? atEnd.messages.get('a1')! : undefined;
    const raw = message_!.blocks.blocks.map(
      (block) => (block.metadata?.rawMcpToolResponse as { partialArguments: string }).partialArguments,
    );
    expect(raw).toEqual(ids.map(() => '{"a":1}'));
    expect(message_!.snapshots.toolArguments.size).toBe(0);
    const midway = stateOf(...state, ...decision.events.slice(0, 80).map((e) => e.event));
    expect(midway.status === 'open' && midway.messages.get('a1')!.snapshots.toolArguments.size).toBe(32);
  });

  it('reports each recorded chunk that changes nothing, with the reason, and records it anyway', () => {
    for (const { label, chunks: values, seq, reason } of IGNORED_CHUNK_CASES) {
      recorded('a1', chunks(...values)).then((decision) => {
        expect({ label, events: decision.events.length }).toEqual({ label, events: values.length });
        expect({ label, ignored: decision.ignored }).toEqual({ label, ignored: [{ seq, reason }] });
      });
    }
    recorded('a1', chunks({ type: 'text.start' }, { type: 'text.delta', text: 'hi' }, { type: 'block_complete' })).then(
      (decision) => expect(decision.ignored).toEqual([]),
    );
  });

  it('takes chunks only for assistant messages that exist', () => {
    given(opened, message('u1', 'user', null))
      .when({ type: 'append_chunks', messageId: 'u1', chunks: chunks({ type: 'text.start' }) })
      .thenThrows('not_assistant');
    given(opened)
      .when({ type: 'append_chunks', messageId: 'zz', chunks: chunks({ type: 'text.start' }) })
      .thenThrows('message_not_found');
  });

  describe('branch trees', () => {
    const tree = [
      opened,
      message('u1', 'user', null),
      message('a1', 'assistant', 'u1'),
      message('u2', 'user', 'a1'),
      message('a2', 'assistant', 'u2'),
    ];
    const pathOf = (state: SessionState) =>
      activePath((state as OpenSession).selectedRootId, (state as OpenSession).messages).map((m) => m.id);
    const select = (parentId: string | null, childId: string): SessionEvent => ({
      type: 'message.branch_selected',
      data: { parentId, childId },
    });

    it('a new message under a parent that has children is a new branch and becomes the selected one', () => {
      const state = stateOf(...tree, message('a1b', 'assistant', 'u1'));
      expect(pathOf(state)).toEqual(['u1', 'a1b']);
      const shape = branchTree((state as OpenSession).selectedRootId, [...(state as OpenSession).messages.values()]);
      expect(shape.messages.find((m) => m.id === 'u1')).toMatchObject({
        children: ['a1', 'a1b'],
        selectedChild: 'a1b',
      });
      // The old branch keeps its own selections: going back shows it as it was.
      expect(pathOf(stateOf(...tree, message('a1b', 'assistant', 'u1'), select('u1', 'a1')))).toEqual([
        'u1',
        'a1',
        'u2',
        'a2',
      ]);
    });

    it('a new message on a branch that is not active selects its whole path', () => {
      const state = stateOf(...tree, message('a1b', 'assistant', 'u1'), message('u2b', 'user', 'a1'));
      expect(pathOf(state)).toEqual(['u1', 'a1', 'u2b']);
    });

    it('editing the first message makes a new top-level branch; the session selects among top-level messages', () => {
      const state = stateOf(...tree, message('u1b', 'user', null));
      expect(pathOf(state)).toEqual(['u1b']);
      expect(pathOf(stateOf(...tree, message('u1b', 'user', null), select(null, 'u1')))).toEqual([
        'u1',
        'a1',
        'u2',
        'a2',
      ]);
      given(...tree, message('u1b', 'user', null))
        .when({
          type: 'create_message',
          messageId: 'a3',
          role: 'assistant',
          parentId: undefined,
          model: null,
          content: null,
        })
        .then(({ parentId }) => expect(parentId).toBe('u1b'));
    });

    it('selects only an existing child of the named parent, and records nothing when it is already selected', () => {
      const branched = [...tree, message('a1b', 'assistant', 'u1')];
      given(...branched)
        .when({ type: 'select_branch', parentId: 'u1', childId: 'a1', eventId: '00000000-0000-4000-8000-000000000001' })
        .then(({ events }) => {
          expect(events).toEqual([{ id: '00000000-0000-4000-8000-000000000001', event: select('u1', 'a1') }]);
        });
      given(...branched)
        .when({
          type: 'select_branch',
          parentId: 'u1',
          childId: 'a1b',
          eventId: '00000000-0000-4000-8000-000000000002',
        })
        .then(({ events }) => expect(events).toEqual([]));
      given(...branched)
        .when({ type: 'select_branch', parentId: 'u1', childId: 'u2', eventId: '00000000-0000-4000-8000-000000000003' })
        .thenThrows('not_a_child', 'childId');
      given(...branched)
        .when({
          type: 'select_branch',
          parentId: 'nope',
          childId: 'a1',
          eventId: '00000000-0000-4000-8000-000000000004',
        })
        .thenThrows('message_not_found');
      given(...branched)
        .when({ type: 'select_branch', parentId: null, childId: 'a1', eventId: '00000000-0000-4000-8000-000000000005' })
        .thenThrows('not_a_child', 'childId');
    });

    it('a selection event that does not fit the tree changes nothing but the count of what the stream holds', () => {
      const misfit = { ...select('u1', 'u2'), position: 99n, recordedAt: '2026-01-01T00:00:00.000Z' };
      const state = stateOf(...tree) as OpenSession;
      const decided = evolveSession(state, misfit) as OpenSession;
      expect({ ...decided, stored: null }).toEqual({ ...state, stored: null });
      expect(decided.stored).toEqual({
        events: state.stored!.events + 1,
        bytes: state.stored!.bytes + JSON.stringify(misfit.data).length,
      });
      // A fold for reading keeps the very same state: its readers find changes by identity.
      const read = tree.reduce<SessionState>(
        (current, event, index) =>
          evolveSession(current, { ...event, position: BigInt(index + 1), recordedAt: misfit.recordedAt }, 'read'),
        initialSessionState,
      );
      expect(evolveSession(read, misfit, 'read')).toBe(read);
    });
  });

  describe('forks', () => {
    const source = stateOf(
      opened,
      message('u1', 'user', null),
      message('a1', 'assistant', 'u1'),
      message('a1b', 'assistant', 'u1'),
      message('u2', 'user', 'a1b'),
    );
    const fork = (messageId: string | null) => ({
      type: 'fork_session' as const,
      sessionId: 'f1',
      title: null,
      metadata: null,
      sourceSessionId: 's1',
      source,
      messageId,
      owner: 'subject:alice',
      writers: [],
    });

    it('records the source and its position, not its events; the fork holds the source tree under its own id', () => {
      given()
        .when(fork(null))
        .then(({ events }) => {
          expect(events).toHaveLength(1);
          expect(events[0].event).toEqual({
            type: 'session.forked',
            data: {
              sessionId: 'f1',
              title: null,
              metadata: {},
              source: { sessionId: 's1', position: '5', messageId: null },
              owner: 'subject:alice',
              writers: [],
            },
          });
          const forked = forkSession(source, {
            ...events[0].event,
            position: 9n,
            recordedAt: '2026-01-02T00:00:00.000Z',
          }) as OpenSession;
          expect(forked).toMatchObject({
            sessionId: 'f1',
            position: 9n,
            forkedFrom: { sessionId: 's1', position: '5' },
            owner: 'subject:alice',
          });
          expect(activePath(forked.selectedRootId, forked.messages).map((m) => m.id)).toEqual(['u1', 'a1b', 'u2']);
          expect([...forked.messages.keys()]).toEqual(['u1', 'a1', 'a1b', 'u2']);
        });
    });

    it('at a message, keeps only the path ending there, which becomes the active leaf', () => {
      given()
        .when(fork('a1'))
        .then(({ events }) => {
          const forked = forkSession(source, {
            ...events[0].event,
            position: 9n,
            recordedAt: '2026-01-02T00:00:00.000Z',
          }) as OpenSession;
          expect([...forked.messages.keys()]).toEqual(['u1', 'a1']);
          expect(activePath(forked.selectedRootId, forked.messages).map((m) => m.id)).toEqual(['u1', 'a1']);
          expect(forked.messages.get('a1')!.selectedChildId).toBeNull();
        });
    });

    it('answers the same fork again as the first, and refuses another under its id naming what differs', () => {
      const forkedEvent = decideSession(fork('a1'), initialSessionState).events[0].event;
      const forked = forkSession(source, { ...forkedEvent, position: 9n, recordedAt: '2026-01-02T00:00:00.000Z' });
      expect(decideSession(fork('a1'), forked)).toEqual({
        events: [],
        duplicateSeqs: [],
        repeatOf: { position: 9n },
        forkedFrom: { sessionId: 's1', position: '5', messageId: 'a1' },
      });
      const later = stateOf(opened, message('u1', 'user', null), message('a1', 'assistant', 'u1')) as OpenSession;
      const differences: [Partial<Extract<SessionCommand, { type: 'fork_session' }>>, string][] = [
        [{ messageId: 'u2' }, 'messageId'],
        [{ sourceSessionId: 's2' }, 'sourceSessionId'],
        [{ source: { ...later, position: 3n } }, 'atPosition'],
        [{ title: 'another' }, 'title'],
        [{ metadata: { other: true } }, 'metadata'],
        [{ writers: ['subject:bob'] }, 'writers'],
      ];
      for (const [change, field] of differences) {
        expect(() => decideSession({ ...fork('a1'), ...change }, forked)).toThrow(
          expect.objectContaining({ code: 'session_exists', field }),
        );
      }
    });

    it('refuses an existing fork id, a source absent at that position, and a message the source did not hold', () => {
      given(opened)
        .when({ ...fork(null), sessionId: 's1' })
        .thenThrows('session_exists', 'id');
      given()
        .when({ ...fork(null), source: initialSessionState })
        .thenThrows('source_not_found');
      given().when(fork('zz')).thenThrows('message_not_found', 'messageId');
    });
  });

  describe('governed tool calls', () => {
    const pending = chunks({
      type: 'mcp_tool_pending',
      responses: [
        { id: 'call_1', tool: { name: 'read_file', serverName: 'fs' }, arguments: { path: '/x' }, status: 'pending' },
      ],
    });
    const withPending: SessionEvent[] = [
      opened,
      message('u1', 'user', null),
      message('a1', 'assistant', 'u1'),
      ...decideSession(
        { type: 'append_chunks', messageId: 'a1', chunks: pending },
        stateOf(opened, message('u1', 'user', null), message('a1', 'assistant', 'u1')),
      ).events.map(({ event }) => event),
    ];
    const update = (status: 'invoking' | 'done', response?: unknown): SessionCommand => ({
      type: 'update_tool_call',
      eventId: `e-${status}`,
      messageId: 'a1',
      toolCallId: 't1',
      response: {
        id: 'call_1',
        tool: { name: 'read_file', serverName: 'fs' },
        arguments: { path: '/x' },
        status,
        ...(response ? { response } : {}),
      },
      governance: { toolCallId: 't1', status: status === 'done' ? 'succeeded' : 'executing' },
    });
    const toolBlock = (state: SessionState) =>
      (state as OpenSession).messages.get('a1')!.blocks.blocks.find((block) => block.type === 'tool')!;

    it('moves the tool block through processing to success with the governance record, taking no producer seq', () => {
      const invoking = decideSession(update('invoking'), stateOf(...withPending)).events.map(({ event }) => event);
      const executing = stateOf(...withPending, ...invoking);
      expect(toolBlock(executing)).toMatchObject({
        status: 'processing',
        metadata: { governance: { status: 'executing' }, rawMcpToolResponse: { status: 'invoking' } },
      });
      const result = { content: [{ type: 'text', text: 'x' }], isError: false };
      const done = decideSession(update('done', result), executing).events.map(({ event }) => event);
      const finished = stateOf(...withPending, ...invoking, ...done);
      expect(toolBlock(finished)).toMatchObject({
        status: 'success',
        content: result,
        metadata: { governance: { status: 'succeeded' } },
      });
      // The producer's next chunk is still seq 2.
      given(...withPending, ...invoking, ...done)
        .when({
          type: 'append_chunks',
          messageId: 'a1',
          chunks: chunks({ type: 'text.start' }, { type: 'text.start' }).slice(1),
        })
        .then((decision) => expect(decision.events.map(({ event }) => event.type)).toEqual(['chunk.text.start']));
    });

    it('refuses an update for a message the session does not hold', () => {
      given(...withPending)
        .when({ ...update('invoking'), messageId: 'nope' } as SessionCommand)
        .thenThrows('message_not_found');
      given().when(update('invoking')).thenThrows('session_not_found');
    });
  });
});

describe('user attachments (issue 18)', () => {
  const photo = {
    name: 'paris.png',
    mimeType: 'image/png',
    size: 2048,
    sha256: 'a'.repeat(64),
    url: 'https://files.example/paris.png',
  };
  const report = {
    name: 'Report.PDF',
    mimeType: 'application/pdf',
    size: 10,
    sha256: 'b'.repeat(64),
    url: 'https://files.example/r',
  };
  const create = (role: 'user' | 'assistant', content: string | null): SessionCommand => ({
    type: 'create_message',
    messageId: 'u1',
    role,
    parentId: null,
    model: null,
    content,
    attachments: [photo, report],
  });

  it("gives a user message its text, then an image block and a file block in Cherry's shape", () => {
    given(opened)
      .when(create('user', 'What is on these?'))
      .then(({ events }) => {
        const state = stateOf(opened, ...events.map(({ event }) => event)) as OpenSession;
        const blocks = state.messages.get('u1')!.blocks;
        expect(blocks.status).toBe('success');
        const at = '2026-01-01T00:00:00.000Z';
        const file = (id: string, reference: typeof photo, type: string, ext: string) => ({
          id,
          name: reference.name,
          origin_name: reference.name,
          path: reference.url,
          size: reference.size,
          ext,
          type,
          created_at: at,
          count: 1,
          mimeType: reference.mimeType,
          sha256: reference.sha256,
          url: reference.url,
        });
        expect(blocks.blocks).toEqual([
          {
            id: 'u1-text',
            messageId: 'u1',
            type: 'main_text',
            status: 'success',
            createdAt: at,
            content: 'What is on these?',
          },
          {
            id: 'u1-file1',
            messageId: 'u1',
            type: 'image',
            status: 'success',
            createdAt: at,
            url: photo.url,
            file: file('u1-file1', photo, 'image', '.png'),
          },
          {
            id: 'u1-file2',
            messageId: 'u1',
            type: 'file',
            status: 'success',
            createdAt: at,
            file: file('u1-file2', report, 'document', '.pdf'),
          },
        ]);
      });
  });

  it('refuses attachments on any message but a user one', () => {
    given(opened).when(create('assistant', null)).thenThrows('invalid_message', 'attachments');
  });

  it('records no attachments field for a message without any, so earlier events keep their shape', () => {
    given(opened)
      .when({ ...create('user', 'hi'), attachments: [] } as SessionCommand)
      .then(({ events }) => expect(events[0].event.data).not.toHaveProperty('attachments'));
  });
});

describe('translations (issue 18)', () => {
  const chunkEvents = (first: number, ...values: Record<string, unknown>[]): SessionEvent[] =>
    parseChunks(values.map((value, index) => ({ seq: first + index, ...value }))).map(
      (chunk) => ({ type: `chunk.${chunk.type}`, data: { messageId: 'a1', ...chunk } }) as SessionEvent,
    );
  const answered = [
    opened,
    message('u1', 'user', null),
    message('a1', 'assistant', 'u1'),
    ...chunkEvents(
      1,
      { type: 'llm_response_created' },
      { type: 'text.start' },
      { type: 'text.complete', text: 'Hello' },
      { type: 'block_complete' },
    ),
  ];
  const open = (fields: Partial<Extract<SessionCommand, { type: 'open_translation' }>> = {}): SessionCommand => ({
    type: 'open_translation',
    messageId: 'a1',
    blockId: 'a1-t1',
    eventId: 'e-t1',
    targetLanguage: 'fr',
    ...fields,
  });
  const blocksOf = (...events: SessionEvent[]) => (stateOf(...events) as OpenSession).messages.get('a1')!.blocks;

  it("opens a translation block after the ended message's blocks; its chunks fill it; the next chunk's seq is given", () => {
    given(...answered)
      .when(open({ sourceBlockId: 'a1-b1', sourceLanguage: 'en' }))
      .then(({ events, nextSeq }) => {
        expect(nextSeq).toBe(5);
        expect(events.map(({ event }) => event)).toEqual([
          {
            type: 'message.translation_opened',
            data: {
              messageId: 'a1',
              blockId: 'a1-t1',
              targetLanguage: 'fr',
              sourceLanguage: 'en',
              sourceBlockId: 'a1-b1',
            },
          },
        ]);
        const translated = blocksOf(
          ...answered,
          ...events.map(({ event }) => event),
          ...chunkEvents(
            5,
            { type: 'translation.delta', text: 'Bon' },
            { type: 'translation.delta', text: 'Bonjour' },
            { type: 'translation.complete', text: 'Bonjour' },
          ),
        );
        expect(translated.status).toBe('success');
        expect(translated.blocks.map(({ type, status, content }) => ({ type, status, content }))).toEqual([
          { type: 'main_text', status: 'success', content: 'Hello' },
          { type: 'translation', status: 'success', content: 'Bonjour' },
        ]);
        expect(translated.blocks[1]).toMatchObject({
          targetLanguage: 'fr',
          sourceLanguage: 'en',
          sourceBlockId: 'a1-b1',
        });
      });
  });

  it('refuses a translation on a message that holds the most blocks it may, naming the message', () => {
    const responses = pendingToolCalls(MAX_MESSAGE_BLOCKS);
    const full = [...answered.slice(0, 3), ...chunkEvents(1, { type: 'mcp_tool_pending', responses })];
    given(...full)
      .when(open())
      .thenThrows('message_full', 'mid');
    given(...full.slice(0, 3))
      .when(open())
      .then(({ events }) => expect(events).toHaveLength(1));
  });

  it('a translation opened while another is unfinished leaves that one paused', () => {
    const first = decideSession(open(), stateOf(...answered)).events.map(({ event }) => event);
    const second = decideSession(
      open({ blockId: 'a1-t2', eventId: 'e-t2', targetLanguage: 'de' }),
      stateOf(...answered, ...first),
    );
    const blocks = blocksOf(...answered, ...first, ...second.events.map(({ event }) => event));
    expect(blocks.blocks.slice(1).map(({ id, status }) => ({ id, status }))).toEqual([
      { id: 'a1-t1', status: 'paused' },
      { id: 'a1-t2', status: 'streaming' },
    ]);
  });

  it('refuses an unknown message, a user message, and a source block the message does not hold', () => {
    given(...answered)
      .when(open({ messageId: 'nope' }))
      .thenThrows('message_not_found');
    given(...answered)
      .when(open({ messageId: 'u1' }))
      .thenThrows('not_assistant');
    given(...answered)
      .when(open({ sourceBlockId: 'a1-b9' }))
      .thenThrows('block_not_found', 'sourceBlockId');
  });
});

describe('a fold for reading', () => {
  const state = [opened, message('u1', 'user', null), message('a1', 'assistant', 'u1')];
  const first = chunks({ type: 'text.start' }, { type: 'text.delta', text: 'Hi' });
  const recorded = [
    ...state,
    ...decideSession({ type: 'append_chunks', messageId: 'a1', chunks: first }, stateOf(...state)).events.map(
      ({ event }) => event,
    ),
  ];
  const foldFor = (purpose: 'decide' | 'read') =>
    recorded.reduce<SessionState>(
      (current, event, index) =>
        evolveSession(
          current,
          { ...event, position: BigInt(index + 1), recordedAt: '2026-01-01T00:00:00.000Z' },
          purpose,
        ),
      initialSessionState,
    ) as OpenSession;

  it('holds the same messages, blocks and seqs as a fold for deciding, and no digest', () => {
    const read = foldFor('read').messages.get('a1')!;
    const decide = foldFor('decide').messages.get('a1')!;
    expect({ ...read, chunkDigests: undefined }).toEqual({ ...decide, chunkDigests: undefined });
    expect(read.chunkDigests.length).toBe(2);
    expect(read.chunkDigests.items).toEqual([DIGEST_NOT_KEPT, DIGEST_NOT_KEPT]);
    expect(decide.chunkDigests.items).not.toContain(DIGEST_NOT_KEPT);
  });

  it('cannot judge a retried seq: deciding on it is a programming error, never a silent answer', () => {
    const retry = { type: 'append_chunks' as const, messageId: 'a1', chunks: first };
    expect(() => decideSession(retry, foldFor('read'))).toThrow(
      'a session folded for reading cannot judge a retried seq',
    );
    expect(decideSession(retry, foldFor('decide')).duplicateSeqs).toEqual([1, 2]);
  });
});
