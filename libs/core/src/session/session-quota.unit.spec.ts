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
import { jsonBytes } from '../hashing/canonical-json.js';
import { foldFootprint } from './fold-footprint.js';
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

    const quota: SessionQuota = { events: 1_000, bytes: 1_000_000, memory: 1e9, messages: 100, forkDepth: 1 };
    // The fork stands on 1 fork: a fork of it would stand on 2.
    expect(() => checkSessionQuota(forkCommand, initialSessionState, [], quota)).not.toThrow();
    const tooDeep = refusal(() => checkSessionQuota({ ...forkCommand, source: fork }, initialSessionState, [], quota));
    expect([tooDeep.code, tooDeep.field]).toEqual(['fork_too_deep', 'sourceSessionId']);
    expect(tooDeep.message).toContain('at most 1');
  });

  it('refuses a command whose events would take the session past its quota, in events, bytes, memory and messages', () => {
    const { state } = run(initialSessionState, open, assistant, chunks(1, '', 'x'));
    const { events, bytes } = (state as OpenSession).stored!;
    const quota = (bounds: Partial<SessionQuota>): SessionQuota => ({
      events: 1_000,
      bytes: 1_000_000,
      memory: 1e9,
      messages: 100,
      forkDepth: 8,
      ...bounds,
    });
    const check = (command: SessionCommand, bounds: Partial<SessionQuota>) =>
      checkSessionQuota(command, state, decideSession(command, state).events, quota(bounds));
    const message = { ...assistant, messageId: 'a2' };
    const twoChunks = chunks(3, 'xy', 'xyz');

    // Up to the quota, a command is taken; one event past it, refused before anything is stored.
    expect(() => check(message, { events: events + 1 })).not.toThrow();
    const past = refusal(() => check(message, { events }));
    expect([past.code, past.message]).toEqual([
      'session_full',
      `the session holds ${events} events; it may hold its quota of ${events}`,
    ]);
    const smallQuota = Math.floor((events + 1) / (1 + UNDER_WAY_SHARE));
    expect(refusal(() => check(twoChunks, { events: smallQuota })).message).toBe(
      `this would take the session from ${events} to ${events + 2} events, past ${events + 1}, ` +
        `its quota of ${smallQuota} and a share more for work under way`,
    );
    // A message's chunks go on past the quota, up to its share more.
    expect(() => check(twoChunks, { events: events + 1 })).not.toThrow();
    // The same in bytes, and in messages.
    const messageBytes = jsonBytes(decideSession(message, state).events[0].event.data);
    expect(() => check(message, { bytes: bytes + messageBytes })).not.toThrow();
    expect(refusal(() => check(message, { bytes: bytes + messageBytes - 1 })).message).toBe(
      `this would take the session from ${bytes} to ${bytes + messageBytes} bytes of event data, past its quota of ${bytes + messageBytes - 1}`,
    );
    // Memory is judged on what the session's fold holds, measured or as the caller measured it.
    const memory = foldFootprint(state);
    expect(() => check(message, { memory: memory + 1 })).not.toThrow();
    expect(refusal(() => check(message, { memory })).message).toBe(
      `the session holds ${memory} bytes of memory when folded; it may hold its quota of ${memory}`,
    );
    const given = (footprint: number) => () =>
      checkSessionQuota(message, state, decideSession(message, state).events, quota({ memory }), footprint);
    expect(given(memory - 1)).not.toThrow();
    expect(refusal(given(memory + 1)).code).toBe('session_full');
    expect(() => check(message, { messages: 2 })).not.toThrow();
    expect(refusal(() => check(message, { messages: 1 })).message).toBe(
      'the session holds 1 messages; it may hold its quota of 1',
    );
    // How a gateway call ended is recorded however full the session is.
    const ended: SessionCommand = {
      type: 'record_answer_failure',
      messageId: 'a1',
      error: { name: 'RecordingGap', message: 'x' },
    };
    expect(() => check(ended, { events: 1, bytes: 1, messages: 1 })).not.toThrow();
    // A tool call's steps go on to twice the share past the quota: one chunk may start many calls.
    const step: SessionCommand = {
      type: 'update_tool_call',
      eventId: '00000000-0000-4000-8000-000000000001',
      messageId: 'a1',
      toolCallId: 'call-1',
      response: null,
      governance: null,
    } as unknown as SessionCommand;
    expect(() => check(step, { events: Math.ceil((events + 1) / 1.5) })).not.toThrow();
    expect(refusal(() => check(step, { events: Math.floor(events / 1.5) })).code).toBe('session_full');
    // A new session's first event may not alone pass the byte quota.
    const opening: SessionCommand = { ...open, metadata: { note: 'n'.repeat(2_000) } };
    const opened = decideSession(opening, initialSessionState).events;
    expect(() => checkSessionQuota(opening, initialSessionState, opened, quota({ bytes: 4_096 }))).not.toThrow();
    expect(
      refusal(() => checkSessionQuota(opening, initialSessionState, opened, quota({ bytes: 1_024 }))).message,
    ).toMatch(/^this would take the session from 0 to \d+ bytes of event data, past its quota of 1024$/);

    // With no events, whether it can take new work at all: not at its quota.
    expect(() =>
      checkSessionQuota({ type: 'record_model_call' }, state, [], quota({ events: events + 1 })),
    ).not.toThrow();
    expect(refusal(() => checkSessionQuota({ type: 'record_model_call' }, state, [], quota({ events }))).code).toBe(
      'session_full',
    );
    // A session not yet opened holds nothing; a fold for reading is never judged.
    expect(() => checkSessionQuota(message, initialSessionState, [], quota({ events: 1 }))).not.toThrow();
    const read = { ...(state as OpenSession), stored: null };
    expect(() => checkSessionQuota(message, read, [], quota({}))).toThrow('folded for reading');
  });
});
