import { randomUUID } from 'node:crypto';
import {
  ANY,
  createPostgresEventLog,
  NO_STREAM,
  type EventLog,
  type PostgresEventLogOptions,
  type SubscriptionBatch,
} from '#event-log';
import { eventLogContract } from '#event-log/testing';
import pg from 'pg';
import { APPEND_LOCK_KEY } from '../../libs/event-log/src/postgres/group-commit-writer.js';
import { EVENT_LOG_CHANNEL } from '../../libs/event-log/src/postgres/postgres-notifier.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

eventLogContract(
  'PostgreSQL adapter',
  async () => {
    const database = await createTestDatabase();
    // Sessions in a zone far from UTC (+05:45): a read must still give back the UTC text the chain hash covers.
    const sql = new pg.Client({ connectionString: database.connectionString });
    await sql.connect();
    const { rows } = await sql.query<{ name: string }>('SELECT current_database() AS name');
    await sql.query(`ALTER DATABASE ${rows[0].name} SET TimeZone = 'Asia/Kathmandu'`);
    await sql.end();
    return {
      connect: () => createPostgresEventLog({ connectionString: database.connectionString, poolSize: 4 }),
      teardown: () => database.drop(),
    };
  },
  { refusedData: { text: 'jsonb has no NUL: \u0000' }, atomicMultiStream: true },
);

/** Two instances of the log on a fresh database, as two service processes would have; `close` ends both and drops it. */
async function twoInstances(options: Partial<PostgresEventLogOptions> = {}) {
  const database = await createTestDatabase();
  const logs = await Promise.all(
    [0, 1].map(() => createPostgresEventLog({ connectionString: database.connectionString, ...options })),
  );
  return {
    database,
    logs,
    async close() {
      await Promise.all(logs.map((log) => log.close()));
      await database.drop();
    },
  };
}

/**
 * What the PostgreSQL adapter's subscriptions do with their own instance's commits (decision
 * 0031): taken from memory, they must never hold up, hide or alter what the log holds.
 */
describe('PostgreSQL subscriptions and their own instance commits', () => {
  let pair: Awaited<ReturnType<typeof twoInstances>>;
  let database: TestDatabase;
  let own: EventLog;
  let other: EventLog;
  const event = (data: unknown = {}) => ({ id: randomUUID(), type: 'test.own', data });

  beforeAll(async () => {
    // No poll to fall back on within a test: only a notification or a read can deliver.
    pair = await twoInstances({ pollIntervalMs: 600_000 });
    ({
      database,
      logs: [own, other],
    } = pair);
  });
  afterAll(() => pair.close());

  /** The subscription's next batch with events, or `undefined` after `ms`. */
  async function nextEvents(batches: AsyncIterator<SubscriptionBatch>, ms = 10_000) {
    const deadline = Date.now() + ms;
    for (;;) {
      const left = deadline - Date.now();
      if (left <= 0) return undefined;
      let timer: NodeJS.Timeout | undefined;
      const result = await Promise.race([
        batches.next(),
        new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), left))),
      ]).finally(() => clearTimeout(timer));
      if (!result || result.done) return undefined;
      if (result.value.events.length > 0) return result.value.events;
    }
  }

  async function subscribe() {
    const subscription = own.subscribeToAll({ fromPosition: await own.headPosition() });
    const batches = subscription[Symbol.asyncIterator]();
    await batches.next(); // caught up
    return { subscription, batches };
  }

  /**
   * Appends on the other instance and resolves once its notification has reached this process (a
   * listener of the test's own, beside the instance's, and a turn of the event loop for the latter).
   */
  async function appendElsewhere() {
    const listener = new pg.Client({ connectionString: database.connectionString });
    await listener.connect();
    try {
      await listener.query(`LISTEN ${EVENT_LOG_CHANNEL}`);
      const told = new Promise((resolve) => listener.once('notification', resolve));
      const appended = await other.append(`other-${randomUUID()}`, [event()], NO_STREAM);
      await told;
      for (let turn = 0; turn < 3; turn += 1) await new Promise(setImmediate);
      return appended;
    } finally {
      await listener.end();
    }
  }

  it('after taking its own commit from memory, it still reads a commit of another instance it was told of', async () => {
    const { subscription, batches } = await subscribe();
    try {
      const mine = await own.append(`own-${randomUUID()}`, [event()], NO_STREAM);
      const theirs = await appendElsewhere();
      const delivered = [...((await nextEvents(batches)) ?? []), ...((await nextEvents(batches)) ?? [])];
      expect(delivered.map((recorded) => recorded.position)).toEqual([mine.position, theirs.position]);
    } finally {
      await subscription.close();
    }
  });

  it('after its listener reconnects, it reads what it may have missed even when its own commit came from memory', async () => {
    const { subscription, batches } = await subscribe();
    const admin = new pg.Client({ connectionString: database.connectionString });
    await admin.connect();
    const listeners = async () =>
      (
        await admin.query<{ pid: number }>(
          `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN%'`,
        )
      ).rows.map((row) => row.pid);
    try {
      const before = await listeners();
      await admin.query('SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid', [before]);
      const mine = await own.append(`own-${randomUUID()}`, [event()], NO_STREAM);
      // Appended while no instance listens: its notification reaches no one.
      const theirs = await other.append(`other-${randomUUID()}`, [event()], NO_STREAM);
      const deadline = Date.now() + 10_000;
      while ((await listeners()).filter((pid) => !before.includes(pid)).length < before.length) {
        if (Date.now() > deadline) throw new Error('the listeners did not reconnect');
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      const delivered = [...((await nextEvents(batches)) ?? []), ...((await nextEvents(batches)) ?? [])];
      expect(delivered.map((recorded) => recorded.position)).toEqual([mine.position, theirs.position]);
    } finally {
      await admin.end();
      await subscription.close();
    }
  });

  it('a commit of its own stuck on the append lock does not hold up what another instance committed', async () => {
    const { subscription, batches } = await subscribe();
    const holder = new pg.Client({ connectionString: database.connectionString });
    await holder.connect();
    try {
      const theirs = await other.append(`other-${randomUUID()}`, [event()], NO_STREAM);
      await holder.query(`BEGIN; SELECT pg_advisory_xact_lock(${APPEND_LOCK_KEY})`);
      const stuck = own.append(`own-${randomUUID()}`, [event()], NO_STREAM);
      const delivered = await nextEvents(batches);
      expect(delivered?.map((recorded) => recorded.position)).toEqual([theirs.position]);
      await holder.query('ROLLBACK');
      await stuck;
    } finally {
      await holder.end();
      await subscription.close();
    }
  });

  it('delivers the data as stored, whatever the caller does to its object once the append is under way', async () => {
    const { subscription, batches } = await subscribe();
    try {
      const data = { count: 1, nested: { items: ['a'] } };
      const appending = own.append(`own-${randomUUID()}`, [event(data)], NO_STREAM);
      data.count = 2;
      data.nested.items.push('b');
      const appended = await appending;
      const [delivered] = (await nextEvents(batches))!;
      const [stored] = (await own.readAll({ fromPosition: appended.position - 1n, maxCount: 1 })).events;
      expect(stored.data).toStrictEqual({ count: 1, nested: { items: ['a'] } });
      expect(delivered).toStrictEqual(stored);
    } finally {
      await subscription.close();
    }
  });
});

describe('PostgreSQL reads for projections', () => {
  let database: TestDatabase;
  let log: EventLog;
  beforeAll(async () => {
    database = await createTestDatabase();
    log = await createPostgresEventLog({ connectionString: database.connectionString });
  });
  afterAll(async () => {
    await log.close();
    await database.drop();
  });

  /** One event appended to a stream of its own, as the append returned it. */
  async function appendedAlone(kind: string) {
    const streamId = `${kind}-${randomUUID()}`;
    const { events } = await log.append(
      streamId,
      [{ id: randomUUID(), type: `test.${kind}`, data: { n: 1 }, correlationId: 'c', actor: 'a', tenant: 't' }],
      NO_STREAM,
    );
    return { streamId, event: events[0] };
  }

  it('reads for projections only what a read model folds, each field as stored', async () => {
    const { streamId, event } = await appendedAlone('projected');
    const [read] = (await log.readAllForProjections({ filter: { streamPrefixes: [streamId] } })).events;
    const { type, revision, position, data, metadata } = event;
    // Nothing more: each column a rebuild does not fold costs PostgreSQL and the driver per row (decision 0048).
    expect(read).toStrictEqual({
      type,
      streamId,
      revision,
      position,
      data,
      metadata: { recordedAt: metadata.recordedAt },
    });
  });

  it("reads for the checkpoint signer only each event's place and chain hash", async () => {
    const { streamId, event } = await appendedAlone('hashed');
    const [read] = (await log.readAllHashes({ filter: { streamPrefixes: [streamId] } })).events;
    const { revision, position, metadata } = event;
    expect(read).toStrictEqual({ streamId, revision, position, metadata: { hash: metadata.hash } });
  });
});

/**
 * Decision 0064: a page the server cancels for running past the statement timeout halves the next pages of readers with
 * the same filter, and a page that runs doubles them back. Per filter: a client whose own filtered scans are slow (a
 * live feed of types that match nothing) must not shrink the pages every other reader takes.
 */
describe('PostgreSQL read pages while the server cancels them', () => {
  let database: TestDatabase;
  let log: EventLog;
  const pageSize = 8;
  const prefixes = { slow: `slow-${randomUUID()}-`, other: `other-${randomUUID()}-` };
  beforeAll(async () => {
    database = await createTestDatabase();
    log = await createPostgresEventLog({
      connectionString: database.connectionString,
      readPageSize: pageSize,
      statementTimeoutMs: 300,
    });
    for (const prefix of Object.values(prefixes)) {
      const events = Array.from({ length: 3 * pageSize }, () => ({
        id: randomUUID(),
        type: 'test.paged',
        data: {},
        correlationId: 'c',
        actor: 'a',
        tenant: 't',
      }));
      await log.append(`${prefix}stream`, events, NO_STREAM);
    }
  });
  afterAll(async () => {
    await log?.close();
    await database?.drop();
  });

  const pageOf = async (prefix: string) => (await log.readAll({ filter: { streamPrefixes: [prefix] } })).events.length;

  /** A read of `prefix`'s page while another connection holds the events' table, so that the server cancels it. */
  async function cancelledRead(prefix: string): Promise<unknown> {
    const holder = new pg.Client({ connectionString: database.connectionString });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('LOCK TABLE event_log_events IN ACCESS EXCLUSIVE MODE');
      return await log.readAll({ filter: { streamPrefixes: [prefix] } }).then(
        () => new Error('read while the table was held'),
        (error: unknown) => error,
      );
    } finally {
      await holder.query('ROLLBACK');
      await holder.end();
    }
  }

  it("halves the pages of the cancelled read's filter only, and doubles them back as pages run", async () => {
    expect([await pageOf(prefixes.slow), await pageOf(prefixes.other)]).toEqual([pageSize, pageSize]);
    expect(await cancelledRead(prefixes.slow)).toMatchObject({ code: '57014' });
    expect(await cancelledRead(prefixes.slow)).toMatchObject({ code: '57014' });
    // Two cancellations: a quarter of a page for that filter, a whole page for any other.
    expect(await pageOf(prefixes.other)).toBe(pageSize);
    expect(await pageOf(prefixes.slow)).toBe(pageSize / 4);
    expect(await pageOf(prefixes.slow)).toBe(pageSize / 2);
    expect(await pageOf(prefixes.slow)).toBe(pageSize);
  });
});

describe('PostgreSQL group commit', () => {
  it('takes every appender its last commit woke into one commit, not the first alone and the rest after', async () => {
    const database = await createTestDatabase();
    const appendsPerCommit: number[] = [];
    const log = await createPostgresEventLog({
      connectionString: database.connectionString,
      onCommit: ({ appends }) => appendsPerCommit.push(appends),
    });
    try {
      const run = randomUUID();
      await Promise.all(
        Array.from({ length: 16 }, async (_, appender) => {
          for (let round = 0; round < 4; round += 1) {
            const event = { id: randomUUID(), type: 'test.grouped', data: { appender, round } };
            const { nextExpectedRevision } = await log.append(`grouped-${run}-${appender}`, [event], ANY);
            expect(nextExpectedRevision).toBe(BigInt(round));
          }
        }),
      );
      expect(appendsPerCommit).toEqual([16, 16, 16, 16]);
    } finally {
      await log.close();
      await database.drop();
    }
  });

  /**
   * A batch planned on this writer's cached stream heads is stored only if each stream is still at
   * the revision and hash planned (`event_log_append`, migration 1763800000250); otherwise nothing
   * is stored and the writer plans again on what the database holds.
   */
  describe('a batch planned on stream heads that moved', () => {
    let pair: Awaited<ReturnType<typeof twoInstances>>;
    let database: TestDatabase;
    let cached: EventLog;
    let other: EventLog;
    const event = (data: unknown = {}) => ({ id: randomUUID(), type: 'test.moved', data });

    beforeAll(async () => {
      pair = await twoInstances();
      ({
        database,
        logs: [cached, other],
      } = pair);
    });
    afterAll(() => pair.close());

    it('is planned again when only the stored hash differs, and chains to the stored one', async () => {
      const streamId = `hash-${randomUUID()}`;
      await cached.append(streamId, [event()], NO_STREAM);
      // The same revision with another last hash: only the hash tells the cached head from the stored one.
      const storedHash = 'ab'.repeat(32);
      const sql = new pg.Client({ connectionString: database.connectionString });
      await sql.connect();
      try {
        await sql.query(`UPDATE event_log_streams SET last_hash = decode($2, 'hex') WHERE stream_id = $1`, [
          streamId,
          storedHash,
        ]);
      } finally {
        await sql.end();
      }
      const result = await cached.append(streamId, [event()], ANY);
      expect(result.nextExpectedRevision).toBe(1n);
      const events = await cached.readStream(streamId);
      expect(events.map(({ revision, metadata }) => [revision, metadata.prevHash])).toEqual([
        [0n, '0'.repeat(64)],
        [1n, storedHash],
      ]);
    });

    it('stores every part of a multi-stream append whose stream moved meanwhile, contiguous, chained, positions in turn', async () => {
      const run = randomUUID();
      const [kept, moved, created] = ['kept', 'moved', 'created'].map((name) => `${name}-${run}`);
      await cached.appendMany([
        { streamId: kept, events: [event({ n: 0 })], expectedRevision: NO_STREAM },
        { streamId: moved, events: [event({ n: 0 })], expectedRevision: NO_STREAM },
      ]);
      await other.append(moved, [event({ by: 'other' })], 0n);
      const head = await cached.headPosition();

      // Every part's head is known to the writer (`created` as no stream), so the batch is planned on its cache.
      const results = await cached.appendMany([
        { streamId: kept, events: [event({ n: 1 })], expectedRevision: ANY },
        { streamId: moved, events: [event({ n: 1 })], expectedRevision: ANY },
        { streamId: created, events: [event({ n: 0 })], expectedRevision: NO_STREAM },
      ]);

      expect(results.map(({ nextExpectedRevision }) => nextExpectedRevision)).toEqual([1n, 2n, 0n]);
      for (const [streamId, revisions] of [
        [kept, 2],
        [moved, 3],
        [created, 1],
      ] as const) {
        const events = await cached.readStream(streamId);
        expect(events.map(({ revision }) => revision)).toEqual([...Array(revisions).keys()].map(BigInt));
        events.slice(1).forEach((stored, index) => expect(stored.metadata.prevHash).toBe(events[index].metadata.hash));
      }
      const { events: logged } = await cached.readAll({ fromPosition: head });
      expect(logged.map(({ position }) => position)).toEqual([head + 1n, head + 2n, head + 3n]);
    });
  });
});
