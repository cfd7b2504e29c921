import { foldFootprint, initialSessionState, parseChunks, sessionChanges, sessionStreamId } from '#core';
import { ANY, createPostgresEventLog, type EventLog } from '#event-log';
import { randomUUID } from 'node:crypto';
import type { RetryLater } from '../../apps/ledger/src/http/api-error.js';
import { LiveHub, type LiveSink } from '../../apps/ledger/src/live/live-hub.js';
import { sessionItems, type LiveItem } from '../../apps/ledger/src/live/live-items.js';
import { foldSessionEvents } from '../../apps/ledger/src/sessions/session-fold.js';
import { SessionRepository, type SessionAuthor } from '../../apps/ledger/src/sessions/session-repository.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

/** The live hub on a real log: a watcher that joins while the session moves on gets all of it, once. */
describe('live hub: joining a session that moves on during the join', () => {
  const author: SessionAuthor = { actor: 'producer', subject: 'producer' };
  const session = { tenant: 'default', sessionId: 'moving-session' };
  const streamId = sessionStreamId(session.tenant, session.sessionId);
  let database: TestDatabase;
  let eventLog: EventLog;
  let repository: SessionRepository;
  let seq = 0;

  const deltas = (count: number) =>
    parseChunks(Array.from({ length: count }, (_, index) => ({ seq: ++seq, type: 'text.delta', text: `t${index}` })));
  const appendDeltas = (count: number) =>
    repository.execute(session, { type: 'append_chunks', messageId: 'm1', chunks: deltas(count) }, author);

  beforeAll(async () => {
    database = await createTestDatabase();
    eventLog = await createPostgresEventLog({ connectionString: database.connectionString, poolSize: 4 });
    repository = new SessionRepository(eventLog);
    await repository.execute(
      session,
      { type: 'open_session', ...session, title: null, metadata: {}, owner: 'producer', writers: [] },
      author,
    );
    await repository.execute(
      session,
      { type: 'create_message', messageId: 'm1', role: 'assistant', parentId: undefined, model: null, content: null },
      author,
    );
    await repository.execute(
      session,
      {
        type: 'append_chunks',
        messageId: 'm1',
        chunks: parseChunks([
          { seq: ++seq, type: 'llm_response_created' },
          { seq: ++seq, type: 'text.start' },
        ]),
      },
      author,
    );
    await appendDeltas(5);
  });

  afterAll(async () => {
    await eventLog.close();
    await database.drop();
  });

  it('reads what was appended after its first read of the stream, and gets later changes live', async () => {
    const streamReads: (bigint | undefined)[] = [];
    // The session moves on right after the watcher's first read, and the hub follows it there
    // before the join is applied: the read is then behind the hub.
    const moving: EventLog = {
      ...eventLog,
      readStream: async (id, options) => {
        const events = await eventLog.readStream(id, options);
        if (id === streamId) streamReads.push(options?.fromRevision);
        if (id === streamId && streamReads.length === 1) {
          const { position } = await appendDeltas(3);
          expect(await hub.reach(position, 10_000)).toBe(true);
        }
        return events;
      },
    };
    const hub = new LiveHub(moving);
    await hub.start();
    const started: LiveItem[][] = [];
    const pushed: LiveItem[][] = [];
    const sink: LiveSink = {
      start: (items) => started.push([...items]),
      push: (items) => pushed.push([...items]),
      close: () => {},
    };
    try {
      const watching = await hub.watch(session, undefined, () => sink);
      expect(watching).toBeDefined();
      const atJoin = await foldSessionEvents(
        eventLog,
        initialSessionState,
        await eventLog.readStream(streamId),
        'read',
      );
      if (atJoin.status !== 'open') throw new Error('the session is not open');
      expect(started).toEqual([sessionItems(sessionChanges(initialSessionState, atJoin), atJoin.position)]);
      // The second read took only what followed the first: the three events appended in between.
      expect(streamReads).toEqual([undefined, (await eventLog.readStream(streamId)).at(-3)!.revision]);

      const { position } = await appendDeltas(2);
      expect(await hub.reach(position, 10_000)).toBe(true);
      expect(pushed.flat().map((item) => item.position)).toEqual(expect.arrayContaining([position]));
      expect(pushed.flat().every((item) => item.position > atJoin.position)).toBe(true);
      watching!.unwatch();
    } finally {
      await hub.stop();
    }
  });

  it("follows a tenant's sessions within its share of the hub's bytes, and lets go of one that grows past it", async () => {
    const other = { tenant: 'default', sessionId: 'other-session' };
    const elsewhere = { tenant: 'acme', sessionId: 'acme-session' };
    for (const ref of [other, elsewhere])
      await repository.execute(
        ref,
        { type: 'open_session', ...ref, title: null, metadata: {}, owner: 'producer', writers: [] },
        author,
      );
    const foldOf = async (id: string) =>
      foldSessionEvents(eventLog, initialSessionState, await eventLog.readStream(id), 'read');
    const watchedFootprint = foldFootprint(await foldOf(streamId));
    const small = foldFootprint(await foldOf(sessionStreamId(other.tenant, other.sessionId)));
    // A tenant's share, a quarter of the hub's bytes, holds the watched session and half the other one.
    const hub = new LiveHub(eventLog, undefined, 4 * (watchedFootprint + small / 2));
    await hub.start();
    const events: string[] = [];
    const sinkNamed = (name: string) => (): LiveSink => {
      events.push(`${name} opened`);
      return { start: () => {}, push: () => {}, close: (reason) => events.push(`${name} ${reason}`) };
    };
    const refusalOf = (watching: Promise<unknown>) =>
      watching.then(
        () => undefined,
        (error: RetryLater) => [error.status, error.code],
      );
    try {
      const first = await hub.watch(session, undefined, sinkNamed('first'));
      expect(hub.watchedBytes).toBe(watchedFootprint);
      expect(await refusalOf(hub.watch(other, undefined, sinkNamed('refused')))).toEqual([503, 'live_feeds_full']);
      // Another tenant has a share of its own; a session already followed is joined as it is.
      const acme = await hub.watch(elsewhere, undefined, sinkNamed('acme'));
      const second = await hub.watch(session, undefined, sinkNamed('second'));
      expect([hub.watchedSessions, events]).toEqual([2, ['first opened', 'acme opened', 'second opened']]);

      // The session grows past its tenant's share: its watchers are let go, with where to resume; not the other's.
      const text = 'x'.repeat(100_000);
      const { position } = await repository.execute(
        session,
        { type: 'append_chunks', messageId: 'm1', chunks: parseChunks([{ seq: ++seq, type: 'text.delta', text }]) },
        author,
      );
      expect(await hub.reach(position, 10_000)).toBe(true);
      expect(events.slice(3)).toEqual(['first live_feeds_full', 'second live_feeds_full']);
      const acmeFootprint = foldFootprint(await foldOf(sessionStreamId(elsewhere.tenant, elsewhere.sessionId)));
      expect([hub.watchedSessions, hub.watchedBytes]).toEqual([1, acmeFootprint]);
      first!.unwatch();
      second!.unwatch();
      expect(hub.watchedBytes).toBe(acmeFootprint);

      // Its room given back, the tenant's other session is followed.
      const later = await hub.watch(other, undefined, sinkNamed('later'));
      expect(hub.watchedBytes).toBe(acmeFootprint + small);
      later!.unwatch();
      acme!.unwatch();
      expect([hub.watchedSessions, hub.watchedBytes]).toEqual([0, 0]);
    } finally {
      await hub.stop();
    }
  });

  // A batch the hub could not fold was retried for ever, and every feed of the instance froze behind it.
  it('lets go of a session whose event it cannot follow, its watchers told where to resume, and goes on', async () => {
    const poisoned = { tenant: 'default', sessionId: 'poisoned-session' };
    await repository.execute(
      poisoned,
      { type: 'open_session', ...poisoned, title: null, metadata: {}, owner: 'producer', writers: [] },
      author,
    );
    const hub = new LiveHub(eventLog);
    await hub.start();
    const events: string[] = [];
    const pushed: LiveItem[][] = [];
    const sinkNamed = (name: string) => (): LiveSink => ({
      start: () => {},
      push: (items) => pushed.push([...items]),
      close: (reason) => events.push(`${name} ${reason}`),
    });
    try {
      const healthy = await hub.watch(session, undefined, sinkNamed('healthy'));
      await hub.watch(poisoned, undefined, sinkNamed('poisoned'));
      // An event no command makes, which the fold cannot apply: a user message whose attachments are not a list.
      const data = { messageId: 'poison', role: 'user', parentId: null, model: null, content: 'x', attachments: 5 };
      await eventLog.append(
        sessionStreamId(poisoned.tenant, poisoned.sessionId),
        [{ id: randomUUID(), type: 'message.created', data, tenant: poisoned.tenant }],
        ANY,
      );
      const { position } = await appendDeltas(2);
      expect(await hub.reach(position, 10_000)).toBe(true);
      expect(events).toEqual(['poisoned live_feed_failed']);
      expect(pushed.flat().map((item) => item.position)).toContain(position);
      expect(hub.watchedSessions).toBe(1);
      healthy!.unwatch();
    } finally {
      await hub.stop();
    }
  });
});
