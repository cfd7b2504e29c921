import { parseChunks } from '../chunks/chunk-schemas.js';
import { decideSession, type SessionError, type SessionCommand } from './session-decider.js';
import {
  evolveSession,
  evolveSessionEvents,
  forkSession,
  initialSessionState,
  type OpenSession,
  type SessionEventEnvelope,
  type SessionState,
} from './session-events.js';
import { checkSessionQuota, UNDER_WAY_SHARE, type SessionQuota } from './session-quota.js';

const recordedAt = '2026-01-01T00:00:00.000Z';
let nextPosition = 1n;

/** Decides each command on the state so far and folds what it appends, as the repository does. */
function run(
  state: SessionState,
  ...commands: SessionCommand[]
): { state: SessionState; events: SessionEventEnvelope[] } {
  const events: SessionEventEnvelope[] = [];
  for (const command of commands)
    for (const { event } of decideSession(command, state).events) {
      const envelope = { ...event, position: nextPosition++, recordedAt };
      events.push(envelope);
      state = evolveSession(state, envelope);
    }
  return { state, events };
}

const open: SessionCommand = {
  type: 'open_session',
  sessionId: 's1',
  title: null,
  metadata: {},
  owner: 'owner',
  writers: [],
};
const assistant: SessionCommand = {
  type: 'create_message',
  messageId: 'a1',
  role: 'assistant',
  parentId: undefined,
  model: null,
  content: null,
};
const chunks = (fromSeq: number, ...texts: string[]): SessionCommand => ({
  type: 'append_chunks',
  messageId: 'a1',
  chunks: parseChunks(
    texts.map((text, index) =>
      fromSeq + index === 1 ? { seq: 1, type: 'text.start' } : { seq: fromSeq + index, type: 'text.delta', text },
    ),
  ),
});
const refusal = (act: () => void) => {
  try {
    act();
  } catch (error) {
    return error as SessionError;
  }
  throw new Error('expected a refusal');
};

describe('session size and quota', () => {
  it('counts every event of the stream and its data as JSON in UTF-8 bytes, however the events are folded', () => {
    const { state, events } = run(initialSessionState, open, assistant, chunks(1, '', 'héllo', 'héllo €'));
    const bytes = events.reduce((sum, event) => sum + Buffer.byteLength(JSON.stringify(event.data)), 0);
    // Multi-byte text counts its bytes, not its characters.
    expect(bytes).toBeGreaterThan(events.reduce((sum, event) => sum + JSON.stringify(event.data).length, 0));
    expect((state as OpenSession).stored).toEqual({ events: events.length, bytes });
    // One call over the run of chunks (folded on the message alone) counts the same.
    expect((evolveSessionEvents(initialSessionState, events) as OpenSession).stored).toEqual({
      events: events.length,
      bytes,
    });
    // A fold for reading neither counts nor measures.
    expect((evolveSessionEvents(initialSessionState, events, 'read') as OpenSession).stored).toBeNull();
  });

  it('a fork holds its source as of the fork, its own first event, and one fork more', () => {
    const source = run(initialSessionState, open, assistant, chunks(1, '', 'abc')).state as OpenSession;
    const forkCommand: SessionCommand = {
      type: 'fork_session',
      sessionId: 'f1',
      title: null,
      metadata: null,
      sourceSessionId: 's1',
      source,
      messageId: null,
      owner: 'owner',
      writers: [],
    };
    const [forked] = decideSession(forkCommand, initialSessionState).events;
    const fork = forkSession(source, { ...forked.event, position: nextPosition++, recordedAt }) as OpenSession;
    expect(fork.stored).toEqual({
      events: source.stored!.events + 1,
      bytes: source.stored!.bytes + Buffer.byteLength(JSON.stringify(forked.event.data)),
    });
    expect([source.forkDepth, fork.forkDepth]).toEqual([0, 1]);

    const quota: SessionQuota = { events: 1_000, bytes: 1_000_000, forkDepth: 1 };
    // The fork stands on 1 fork: a fork of it would stand on 2.
    expect(() => checkSessionQuota(forkCommand, initialSessionState, quota)).not.toThrow();
    const tooDeep = refusal(() => checkSessionQuota({ ...forkCommand, source: fork }, initialSessionState, quota));
    expect([tooDeep.code, tooDeep.field]).toEqual(['fork_too_deep', 'sourceSessionId']);
    expect(tooDeep.message).toContain('at most 1');
  });

  it('refuses new work at the quota and work under way past its share more, in events and in bytes', () => {
    const { state } = run(initialSessionState, open, assistant, chunks(1, '', 'x'));
    const { events, bytes } = (state as OpenSession).stored!;
    const newWork = { type: 'create_message' as const };
    const underWay = { type: 'append_chunks' as const };

    // Below the quota: both go.
    const roomy: SessionQuota = { events: events + 1, bytes: bytes + 1, forkDepth: 8 };
    expect(() => checkSessionQuota(newWork, state, roomy)).not.toThrow();

    // At the event quota: new work is refused, naming what the session holds and its quota.
    const atEvents: SessionQuota = { events, bytes: bytes * 10, forkDepth: 8 };
    const full = refusal(() => checkSessionQuota(newWork, state, atEvents));
    expect(full.code).toBe('session_full');
    expect(full.message).toContain(`holds ${events} events; its quota is ${events}`);
    // Work under way goes on up to the share more, then stops too.
    expect(() => checkSessionQuota(underWay, state, atEvents)).not.toThrow();
    const pastShare: SessionQuota = {
      events: Math.floor(events / (1 + UNDER_WAY_SHARE)),
      bytes: bytes * 10,
      forkDepth: 8,
    };
    expect(refusal(() => checkSessionQuota(underWay, state, pastShare)).code).toBe('session_full');
    for (const type of ['append_dialect_events', 'record_answer_failure', 'update_tool_call'] as const)
      expect(() => checkSessionQuota({ type }, state, atEvents)).not.toThrow();
    for (const type of [
      'create_message',
      'record_model_call',
      'select_branch',
      'open_translation',
      'grant_writers',
    ] as const)
      expect(refusal(() => checkSessionQuota({ type }, state, atEvents)).code).toBe('session_full');

    // The same in bytes.
    const atBytes: SessionQuota = { events: events * 10, bytes, forkDepth: 8 };
    expect(refusal(() => checkSessionQuota(newWork, state, atBytes)).message).toContain(`holds ${bytes} bytes`);
    expect(() => checkSessionQuota(underWay, state, atBytes)).not.toThrow();

    // A session not yet opened holds nothing; a fold for reading is never judged.
    expect(() => checkSessionQuota(newWork, initialSessionState, atEvents)).not.toThrow();
    const read = { ...(state as OpenSession), stored: null };
    expect(() => checkSessionQuota(newWork, read, atEvents)).toThrow('folded for reading');
  });
});
