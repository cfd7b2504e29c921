import { initialSessionState, parseChunks, SessionError, sessionStreamId, type SessionCommand } from '#core';
import { createPostgresEventLog, type EventLog } from '#event-log';
import { foldSessionEvents } from '../../apps/ledger/src/sessions/session-fold.js';
import { SessionRepository, type SessionAuthor } from '../../apps/ledger/src/sessions/session-repository.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

/**
 * Two service instances on one database, each with its own event log and cached session folds:
 * a cache that went stale because the other instance appended must be caught by the log's
 * expected-revision check, never fork or skip the session.
 */
describe('session repository: cached folds across two instances', () => {
  const author: SessionAuthor = { actor: 'producer', subject: 'producer' };
  const session = { tenant: 'default', sessionId: 'shared-session' };
  const streamId = sessionStreamId(session.tenant, session.sessionId);
  let database: TestDatabase;
  let logs: EventLog[];
  let first: SessionRepository;
  let second: SessionRepository;

  beforeAll(async () => {
    database = await createTestDatabase();
    logs = await Promise.all(
      [0, 1].map(() => createPostgresEventLog({ connectionString: database.connectionString, poolSize: 2 })),
    );
    [first, second] = logs.map((log) => new SessionRepository(log));
  });

  afterAll(async () => {
    await Promise.all(logs.map((log) => log.close()));
    await database.drop();
  });

  const deltas = (fromSeq: number, count: number) =>
    parseChunks(
      Array.from({ length: count }, (_, index) => ({ seq: fromSeq + index, type: 'text.delta', text: `t${index}` })),
    );

  it('interleaved appends from both instances: each stored once, in order, and each cache equals the log fold', async () => {
    const opened = {
      type: 'open_session' as const,
      ...session,
      title: null,
      metadata: {},
      owner: 'producer',
      writers: [],
    };
    await first.execute(session, opened, author);
    const message = { type: 'create_message' as const, messageId: 'm1', role: 'assistant' as const };
    await second.execute(session, { ...message, parentId: undefined, model: null, content: null }, author);
    const opening = parseChunks([
      { seq: 1, type: 'llm_response_created' },
      { seq: 2, type: 'text.start' },
    ]);
    await first.execute(session, { type: 'append_chunks', messageId: 'm1', chunks: opening }, author);

    // Each instance's cache is stale on every other round: the other one appended meanwhile.
    const outcomes = [];
    for (let round = 0; round < 6; round += 1) {
      const repository = round % 2 === 0 ? second : first;
      const chunks = deltas(3 + round * 4, 4);
      outcomes.push(await repository.execute(session, { type: 'append_chunks', messageId: 'm1', chunks }, author));
    }

    const stored = await logs[0].readStream(streamId);
    expect(stored.map((event) => event.revision)).toEqual(stored.map((_, index) => BigInt(index)));
    expect(new Set(stored.map((event) => event.id)).size).toBe(stored.length);
    // Each outcome's position is its last event's, as stored.
    for (const outcome of outcomes) {
      const lastId = outcome.decision.events.at(-1)!.id;
      expect(stored.find((event) => event.id === lastId)?.position).toBe(outcome.position);
    }
    const fromLog = await foldSessionEvents(logs[0], initialSessionState, stored, 'decide');
    // The last round was the first instance's: its cache took in its own append; the other one catches up.
    expect(first.cached(session)).toEqual(fromLog);
    expect(await second.load(session)).toEqual(fromLog);
  });

  it('a retried batch the other instance already stored appends nothing and leaves the caches equal to the log', async () => {
    const chunks = deltas(27, 2);
    const command = { type: 'append_chunks' as const, messageId: 'm1', chunks };
    const stored = await first.execute(session, command, author);
    const retried = await second.execute(session, command, author);
    expect(retried.decision).toMatchObject({ events: [], duplicateSeqs: [27, 28] });
    expect(retried.position).toBe(stored.position);
    const fromLog = await foldSessionEvents(logs[1], initialSessionState, await logs[1].readStream(streamId), 'decide');
    expect(first.cached(session)).toEqual(fromLog);
    expect(second.cached(session)).toEqual(fromLog);
  });

  it('a chunk another instance stored with other content is refused on a stale cache, and nothing is stored', async () => {
    const command = (text: string) => ({
      type: 'append_chunks' as const,
      messageId: 'm1',
      chunks: parseChunks([{ seq: 29, type: 'text.delta', text }]),
    });
    await first.execute(session, command('stored first'), author);
    const before = await logs[1].readStream(streamId);
    await expect(second.execute(session, command('something else'), author)).rejects.toThrow(SessionError);
    expect(await logs[1].readStream(streamId)).toEqual(before);
  });

  it('commands queued while an append is in flight are decided each on the ones before it, retries among them too', async () => {
    const command = (fromSeq: number, text = 'queued') => ({
      type: 'append_chunks' as const,
      messageId: 'm1',
      chunks: parseChunks([0, 1].map((offset) => ({ seq: fromSeq + offset, type: 'text.delta', text }))),
    });
    // The first runs alone; the rest queue behind its append and are decided as one group, in order.
    const outcomes = await Promise.all(
      [command(30), command(32), command(34), command(32), command(36)].map((queued) =>
        first.execute(session, queued, author),
      ),
    );
    expect(outcomes.map(({ decision }) => decision.events.length)).toEqual([2, 2, 2, 0, 2]);
    expect(outcomes[3].decision.duplicateSeqs).toEqual([32, 33]);
    await expect(first.execute(session, command(34, 'other text'), author)).rejects.toThrow(SessionError);
    const fromLog = await foldSessionEvents(logs[0], initialSessionState, await logs[0].readStream(streamId), 'decide');
    expect(first.cached(session)).toEqual(fromLog);
  });
});

describe('session repository: two instances writing one id with different content at once', () => {
  const author: SessionAuthor = { actor: 'producer', subject: 'producer' };
  let database: TestDatabase;
  let logs: EventLog[];

  beforeAll(async () => {
    database = await createTestDatabase();
    logs = await Promise.all(
      [0, 1].map(() => createPostgresEventLog({ connectionString: database.connectionString, poolSize: 2 })),
    );
  });

  afterAll(async () => {
    await Promise.all(logs.map((log) => log.close()));
    await database.drop();
  });

  // Neither instance has the session cached: each reads it, decides, and appends; the one that appends
  // second finds the event id stored, by the other, with the other's content.
  it('acknowledges one of them and refuses the other; the log holds what was acknowledged', async () => {
    for (let round = 0; round < 10; round += 1) {
      const session = { tenant: 'default', sessionId: `raced-${round}` };
      const streamId = sessionStreamId(session.tenant, session.sessionId);
      /** Each instance, fresh, runs the command with its own marker at once. */
      async function race(what: string, commandWith: (marker: string) => SessionCommand): Promise<void> {
        const markers = [`${what} from the first`, `${what} from the second`];
        const outcomes = await Promise.allSettled(
          logs.map((log, index) => new SessionRepository(log).execute(session, commandWith(markers[index]), author)),
        );
        const acknowledged = outcomes.flatMap((outcome, index) => (outcome.status === 'fulfilled' ? [index] : []));
        expect(acknowledged).toHaveLength(1);
        expect(outcomes.find((outcome) => outcome.status === 'rejected')?.reason).toBeInstanceOf(SessionError);
        const stored = JSON.stringify((await logs[0].readStream(streamId)).map((event) => event.data));
        expect(stored).toContain(markers[acknowledged[0]]);
        expect(stored).not.toContain(markers[1 - acknowledged[0]]);
      }
      await race('title', (title) => ({
        type: 'open_session',
        ...session,
        title,
        metadata: {},
        owner: 'producer',
        writers: [],
      }));
      await race('content', (content) => ({
        type: 'create_message',
        messageId: 'm1',
        role: 'user',
        parentId: undefined,
        model: null,
        content,
      }));
      const opened = { type: 'create_message' as const, messageId: 'm2', role: 'assistant' as const };
      await new SessionRepository(logs[0]).execute(
        session,
        { ...opened, parentId: 'm1', model: null, content: null },
        author,
      );
      await race('text', (text) => ({
        type: 'append_chunks',
        messageId: 'm2',
        chunks: parseChunks([
          { seq: 1, type: 'llm_response_created' },
          { seq: 2, type: 'text.start' },
          { seq: 3, type: 'text.delta', text },
        ]),
      }));
    }
  });
});
