import {
  decideSession,
  foldFootprint,
  initialSessionState,
  parseChunks,
  SessionError,
  sessionStreamId,
  type OpenSession,
  type SessionCommand,
  type SessionQuota,
} from '#core';
import { createPostgresEventLog, type EventLog, type ReadStreamOptions } from '#event-log';
import { foldSessionEvents, sessionAt } from '../../apps/ledger/src/sessions/session-fold.js';
import {
  SessionRepository,
  type SessionAuthor,
  type SessionRef,
} from '../../apps/ledger/src/sessions/session-repository.js';
import { pendingToolCalls } from '../../libs/core/src/testing/ignored-chunks.js';
import { assistantMessageCommand, openSessionCommand } from '../support/session-commands.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

/**
 * A session's quota on a real log: what is refused is refused before anything is stored, the
 * count agrees however the fold was reached (an append's result, a cold read, another
 * instance), and a fold up to a position reads only what it stands on.
 */
describe('session quota', () => {
  const author: SessionAuthor = { actor: 'producer', subject: 'producer' };
  const quota: SessionQuota = { events: 8, bytes: 64 * 1024, memory: 1e9, messages: 100, forkDepth: 1 };
  let database: TestDatabase;
  let log: EventLog;
  let repository: SessionRepository;

  beforeAll(async () => {
    database = await createTestDatabase();
    log = await createPostgresEventLog({ connectionString: database.connectionString, poolSize: 2 });
    repository = new SessionRepository(log, quota);
  });

  afterAll(async () => {
    await log.close();
    await database.drop();
  });

  const open = openSessionCommand;
  const message = assistantMessageCommand;
  const deltas = (fromSeq: number, count: number, text = 'delta'): SessionCommand => ({
    type: 'append_chunks',
    messageId: 'a1',
    chunks: parseChunks(
      Array.from({ length: count }, (_, index) =>
        fromSeq + index === 1 ? { seq: 1, type: 'text.start' } : { seq: fromSeq + index, type: 'text.delta', text },
      ),
    ),
  });
  const streamOf = (session: SessionRef) => log.readStream(sessionStreamId(session.tenant, session.sessionId));
  const refusalOf = (promise: Promise<unknown>) =>
    promise.then(
      () => {
        throw new Error('expected a refusal');
      },
      (error: SessionError) => error,
    );

  /** The session opened on `repository` with one assistant message, `a1`. */
  const openWithMessage = async (on: SessionRepository, session: SessionRef) => {
    await on.execute(session, open(session.sessionId), author);
    await on.execute(session, message('a1'), author);
  };

  it('a full session takes no new work, lets work under way finish within its share, and stores nothing it refuses', async () => {
    const session = { tenant: 'default', sessionId: 'full-by-events' };
    await openWithMessage(repository, session);
    // 2 events so far; 6 chunks bring it to the quota of 8.
    await repository.execute(session, deltas(1, 6), author);
    const atQuota = await streamOf(session);
    expect(atQuota).toHaveLength(8);

    const full = await refusalOf(repository.execute(session, message('a2'), author));
    expect(full).toBeInstanceOf(SessionError);
    expect([full.code, full.message]).toEqual([
      'session_full',
      'the session holds 8 events; it may hold its quota of 8',
    ]);
    expect(await streamOf(session)).toEqual(atQuota);

    // A retry of what is stored is answered as before: it appends nothing.
    const retried = await repository.execute(session, deltas(5, 2), author);
    expect(retried.decision.events).toEqual([]);

    // The message under way goes on to 10 events (8 and a quarter); a batch that would pass that is refused whole.
    const pastShare = await refusalOf(repository.execute(session, deltas(7, 4), author));
    expect(pastShare.message).toBe(
      'this would take the session from 8 to 12 events, past 10, its quota of 8 and a share more for work under way',
    );
    await repository.execute(session, deltas(7, 2), author);
    expect(await streamOf(session)).toHaveLength(10);
    expect((await refusalOf(repository.execute(session, deltas(9, 1), author))).code).toBe('session_full');
    expect(await streamOf(session)).toHaveLength(10);

    // Another instance, folding the session cold from the log, counts the same and refuses the same.
    const other = new SessionRepository(log, quota);
    const cold = (await other.load(session)) as OpenSession;
    expect(cold.stored).toEqual((repository.cached(session) as OpenSession).stored);
    expect(cold.stored!.events).toBe(10);
    expect((await refusalOf(other.execute(session, message('a2'), author))).code).toBe('session_full');
  });

  it('a session full in bytes, and commands grouped in one append, each decided on the ones before it', async () => {
    const session = { tenant: 'default', sessionId: 'full-by-bytes' };
    const large = { ...quota, events: 1_000, bytes: 4_096 };
    const own = new SessionRepository(log, large);
    await openWithMessage(own, session);
    await own.execute(session, deltas(1, 1), author);
    // The first runs alone; the other two queue behind its append and are decided as one group:
    // the message is decided on the session as the large delta before it leaves it, full.
    const outcomes = await Promise.allSettled([
      own.execute(session, deltas(2, 1), author),
      own.execute(session, deltas(3, 1, 'x'.repeat(4_000)), author),
      own.execute(session, message('a2'), author),
    ]);
    expect(outcomes.map((outcome) => outcome.status)).toEqual(['fulfilled', 'fulfilled', 'rejected']);
    expect(((outcomes[2] as PromiseRejectedResult).reason as SessionError).message).toMatch(
      /^the session holds \d+ bytes of event data; it may hold its quota of 4096$/,
    );
    const stored = await streamOf(session);
    expect(stored.map((event) => event.type).slice(-1)).toEqual(['chunk.text.delta']);
    const folded = (await foldSessionEvents(log, initialSessionState, stored, 'decide')) as OpenSession;
    expect(folded.stored!.bytes).toBeGreaterThanOrEqual(4_096);
    expect(own.cached(session)).toEqual(folded);
  });

  it('commands grouped in one append, each judged on the memory the ones before it leave the fold holding', async () => {
    const session = { tenant: 'default', sessionId: 'full-by-memory' };
    const memory = 64 * 1024;
    const own = new SessionRepository(log, { ...quota, events: 1_000, bytes: 1_000_000, memory });
    await openWithMessage(own, session);
    const calls = (seq: number, count: number): SessionCommand => ({
      type: 'append_chunks',
      messageId: 'a1',
      chunks: parseChunks([{ seq, type: 'mcp_tool_pending', responses: pendingToolCalls(count, seq * 1_000) }]),
    });
    // As above: the first runs alone, the other two are decided as one group. Before the group the fold holds
    // under its quota of memory; the 200 calls take it past, so the message after them is refused.
    const outcomes = await Promise.allSettled([
      own.execute(session, calls(1, 1), author),
      own.execute(session, calls(2, 200), author),
      own.execute(session, message('a2'), author),
    ]);
    expect(outcomes.map((outcome) => outcome.status)).toEqual(['fulfilled', 'fulfilled', 'rejected']);
    expect(((outcomes[2] as PromiseRejectedResult).reason as SessionError).message).toMatch(
      /^the session holds \d+ bytes of memory when folded; it may hold its quota of 65536$/,
    );
    const stored = await streamOf(session);
    expect(stored.map((event) => event.type).slice(-2)).toEqual(['chunk.mcp_tool_pending', 'chunk.mcp_tool_pending']);
    expect(foldFootprint(own.cached(session)!)).toBeGreaterThan(memory);
  });

  it('the cached folds hold at most their budget of memory: the oldest are dropped, and read again when needed', async () => {
    const small = { ...quota, events: 1_000, bytes: 1_000_000 };
    const fill = async (target: SessionRepository, session: SessionRef) => {
      await openWithMessage(target, session);
      await target.execute(session, deltas(1, 2, 'y'.repeat(3_500)), author);
    };
    // What one such session holds, by the estimate the cache is bounded by.
    const probe = { tenant: 'default', sessionId: 'cached-probe' };
    const unbounded = new SessionRepository(log, small);
    await fill(unbounded, probe);
    const one = foldFootprint(unbounded.cached(probe)!);
    expect(one).toBeGreaterThan(3_500);
    const own = new SessionRepository(log, small, Math.floor(4.5 * one));
    const sessions = Array.from({ length: 6 }, (_, index) => ({ tenant: 'default', sessionId: `cached-${index}` }));
    for (const session of sessions) await fill(own, session);
    const isCached = (session: SessionRef) => own.cached(session) !== undefined;
    expect(sessions.map(isCached)).toEqual([false, false, true, true, true, true]);
    // A dropped one is folded again from the log, and the oldest of the others makes room.
    expect(((await own.load(sessions[0])) as OpenSession).stored!.bytes).toBeGreaterThan(3_500);
    expect([isCached(sessions[0]), isCached(sessions[2])]).toEqual([true, false]);

    // A session larger than the whole budget is kept alone: it is the one in use, and the others make room.
    const huge = { tenant: 'default', sessionId: 'cached-huge' };
    await openWithMessage(unbounded, huge);
    await unbounded.execute(huge, deltas(1, 2, 'z'.repeat(20 * one)), author);
    expect(((await own.load(huge)) as OpenSession).stored!.bytes).toBeGreaterThan(20 * one);
    expect([isCached(huge), ...sessions.map(isCached)]).toEqual([true, false, false, false, false, false, false]);
  });

  it("counts a fold's blocks against the budget, not only its data: a session of small tool calls", async () => {
    const calls = { tenant: 'default', sessionId: 'cached-calls' };
    const roomy = { ...quota, events: 10_000, bytes: 10_000_000 };
    const unbounded = new SessionRepository(log, roomy);
    await openWithMessage(unbounded, calls);
    const pending: SessionCommand = {
      type: 'append_chunks',
      messageId: 'a1',
      chunks: parseChunks([{ seq: 1, type: 'mcp_tool_pending', responses: pendingToolCalls(2_000) }]),
    };
    await unbounded.execute(calls, pending, author);
    const folded = unbounded.cached(calls) as OpenSession;
    // Its data would fit four times in this budget; the 2,000 blocks it holds would not.
    const budget = 4 * folded.stored!.bytes;
    expect(foldFootprint(folded)).toBeGreaterThan(budget);
    const bounded = new SessionRepository(log, roomy, budget);
    const other = { tenant: 'default', sessionId: 'cached-beside-calls' };
    await bounded.execute(other, open(other.sessionId), author);
    expect(bounded.cached(other)).toBeDefined();
    expect(((await bounded.load(calls)) as OpenSession).messages.get('a1')!.blocks.blocks).toHaveLength(2_000);
    expect([bounded.cached(calls) !== undefined, bounded.cached(other) !== undefined]).toEqual([true, false]);
  });

  it('a fork stands on at most the quota of forks, and a refused fork stores nothing', async () => {
    const source = { tenant: 'default', sessionId: 'fork-source' };
    await repository.execute(source, open(source.sessionId), author);
    const forkOf = (sourceId: string, forkId: string, state: OpenSession): SessionCommand => ({
      type: 'fork_session',
      sessionId: forkId,
      title: null,
      metadata: null,
      sourceSessionId: sourceId,
      source: state,
      messageId: null,
      owner: 'producer',
      writers: [],
    });
    const first = { tenant: 'default', sessionId: 'fork-1' };
    await repository.execute(
      first,
      forkOf('fork-source', 'fork-1', (await repository.load(source)) as OpenSession),
      author,
    );
    const firstState = (await repository.load(first)) as OpenSession;
    expect(firstState.forkDepth).toBe(1);
    const second = { tenant: 'default', sessionId: 'fork-2' };
    const tooDeep = await refusalOf(repository.execute(second, forkOf('fork-1', 'fork-2', firstState), author));
    expect([tooDeep.code, tooDeep.field]).toEqual(['fork_too_deep', 'sourceSessionId']);
    expect(await streamOf(second)).toEqual([]);
  });

  it('a fold up to a position reads pages only up to it, and equals the fold of every event up to it', async () => {
    const session = { tenant: 'default', sessionId: 'long-session' };
    const streamId = sessionStreamId(session.tenant, session.sessionId);
    let state = initialSessionState;
    const commands = [open(session.sessionId), message('a1'), deltas(1, 12_000)];
    for (const command of commands) {
      const events = decideSession(command, state).events.map(({ id, event }) => ({
        id,
        type: event.type,
        data: event.data,
      }));
      for (let from = 0; from < events.length; from += 2_000) {
        const result = await log.append(streamId, events.slice(from, from + 2_000), 'any');
        state = await foldSessionEvents(log, state, result.events, 'decide');
      }
    }
    const stored = await log.readStream(streamId);
    expect(stored).toHaveLength(12_002);
    const read: number[] = [];
    const counting = {
      readStream: async (id: string, options?: ReadStreamOptions) => {
        const events = await log.readStream(id, options);
        read.push(events.length);
        return events;
      },
    };
    for (const cut of [3, 5_000, 5_001, 7_777, 12_001]) {
      read.length = 0;
      const at = stored[cut].position;
      const paged = await sessionAt(counting, session, at, 'decide');
      expect(paged).toEqual(await foldSessionEvents(log, initialSessionState, stored.slice(0, cut + 1), 'decide'));
      // Whole pages before the cut, and the page holding it: never the rest of the stream.
      expect(read.reduce((sum, count) => sum + count, 0)).toBe(Math.min(12_002, (Math.floor(cut / 5_000) + 1) * 5_000));
    }
  });
});
