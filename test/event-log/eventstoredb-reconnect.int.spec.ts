import { randomBytes, randomUUID } from 'node:crypto';
import esdb from '@eventstore/db-client';
import {
  ANY,
  NO_STREAM,
  WrongExpectedRevisionError,
  type EventLog,
  type NewEvent,
  type RecordedEvent,
} from '#event-log';
import { createEventStoreDbEventLog } from '#event-log/eventstoredb';
import {
  collectUntil,
  expectChainHolds,
  isStrictlyIncreasing,
  newEvents,
  positions,
  uniquePrefix,
} from '#event-log/testing';
import {
  DEFAULT_MAX_APPEND_SIZE,
  startEventStoreDouble,
  type EventStoreDouble,
  type FollowerDouble,
} from '../support/eventstoredb-double/eventstoredb-double.js';

/** Resolves once `check` holds, polling briefly; fails after `timeoutMs`. */
async function until(check: () => boolean, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('EventStoreDB adapter when the server goes away', () => {
  let double: EventStoreDouble;
  beforeEach(async () => {
    double = await startEventStoreDouble();
  });
  afterEach(async () => {
    await double.stop();
  });

  it('a subscriber resumes from its checkpoint and an append made while the server was down is retried, with nothing missed or repeated', async () => {
    const dropped: Error[] = [];
    const writer = createEventStoreDbEventLog({
      connectionString: double.connectionString,
      retryDelayMs: 50,
      onError: (error) => dropped.push(error),
    });
    const reader = createEventStoreDbEventLog({ connectionString: double.connectionString, retryDelayMs: 50 });
    const streamId = `${uniquePrefix('reconnect')}s`;
    const received: RecordedEvent[] = [];
    const subscription = reader.subscribeToAll({
      fromPosition: await reader.headPosition(),
      filter: { streamPrefixes: [streamId] },
    });
    const consuming = (async () => {
      for await (const batch of subscription) received.push(...batch.events);
    })();
    try {
      await writer.append(streamId, newEvents(20), NO_STREAM);
      await until(() => received.length === 20, 'the first 20 events');

      await double.stop();
      const duringOutage = writer.append(streamId, newEvents(10), 19n);
      await until(() => dropped.length > 0, 'the writer to notice the outage');
      await double.start();
      await expect(duringOutage).resolves.toMatchObject({ nextExpectedRevision: 29n, appended: 10 });
      await writer.append(streamId, newEvents(30), 29n);

      await until(() => received.length >= 60, 'all 60 events after the restart');
      expect(received.map((event) => event.revision)).toEqual(Array.from({ length: 60 }, (_, index) => BigInt(index)));
      expect(isStrictlyIncreasing(positions(received))).toBe(true);
      expect(await writer.readStream(streamId)).toHaveLength(60);
    } finally {
      await subscription.close();
      await consuming;
      await Promise.all([writer.close(), reader.close()]);
    }
  });
});

describe('the double speaks Streams.Append as well as BatchAppend', () => {
  it('accepts an append, answers a wrong expected version, refuses an oversize append', async () => {
    const double = await startEventStoreDouble();
    const client = esdb.EventStoreDBClient.connectionString(double.connectionString);
    // Credentials make the client use the unary Append call instead of BatchAppend.
    const credentials = { username: 'admin', password: 'changeit' };
    const event = () => esdb.jsonEvent({ type: 'test.appended', data: { ok: true } });
    try {
      await expect(
        client.appendToStream('plain-append', [event(), event()], { expectedRevision: esdb.NO_STREAM, credentials }),
      ).resolves.toMatchObject({
        success: true,
        nextExpectedRevision: 1n,
      });
      await expect(
        client.appendToStream('plain-append', event(), { expectedRevision: 0n, credentials }),
      ).rejects.toMatchObject({
        type: esdb.ErrorType.WRONG_EXPECTED_VERSION,
        expectedVersion: 0n,
        actualVersion: 1n,
      });
      // Over the node's maximum append size, on either call, the append is refused whole.
      const huge = esdb.jsonEvent({ type: 'test.huge', data: { text: 'x'.repeat(DEFAULT_MAX_APPEND_SIZE) } });
      for (const options of [{ credentials }, {}]) {
        await expect(client.appendToStream('plain-append', [event(), huge], options)).rejects.toMatchObject({
          type: esdb.ErrorType.MAXIMUM_APPEND_SIZE_EXCEEDED,
          maxAppendSize: DEFAULT_MAX_APPEND_SIZE,
        });
      }
      expect(double.store.stream('plain-append')).toHaveLength(2);
    } finally {
      await client.dispose();
      await double.stop();
    }
  });
});

describe('EventStoreDB adapter connected to a follower that replicates no more (cut off, or left behind by an election)', () => {
  let leader: EventStoreDouble;
  let follower: FollowerDouble;
  let onLeader: EventLog;
  let streamId: string;
  /** What the leader holds and the follower never saw. */
  let leaderOnly: NewEvent[];
  beforeEach(async () => {
    leader = await startEventStoreDouble();
    follower = await leader.startFollower();
    onLeader = createEventStoreDbEventLog({ connectionString: leader.connectionString });
    streamId = `${uniquePrefix('follower')}s`;
    await onLeader.append(streamId, newEvents(3), NO_STREAM);
    follower.stopReplication();
    leaderOnly = newEvents(2);
    await onLeader.append(streamId, leaderOnly, 2n);
  });
  afterEach(async () => {
    await onLeader.close();
    await follower.stop();
    await leader.stop();
  });

  /** Runs `use` on an adapter whose client starts on the follower. */
  async function onFollower(use: (log: EventLog) => Promise<void>): Promise<void> {
    const log = createEventStoreDbEventLog({ connectionString: follower.connectionString, retryDelayMs: 10 });
    try {
      await use(log);
    } finally {
      await log.close();
    }
  }

  it('every call, even the first one on the follower, answers what the leader holds', async () => {
    const ids = (events: readonly RecordedEvent[]) => events.map((event) => event.id).slice(3);
    const leaderIds = leaderOnly.map(({ id }) => id);
    const filter = { streamPrefixes: [streamId] };
    const firstCalls: Record<string, (log: EventLog) => Promise<void>> = {
      readStream: async (log) => expect(ids(await log.readStream(streamId))).toEqual(leaderIds),
      readAll: async (log) => expect(ids((await log.readAll({ filter })).events)).toEqual(leaderIds),
      headPosition: async (log) => expect(await log.headPosition()).toBe(await onLeader.headPosition()),
      subscribeToAll: async (log) => {
        const heard = await collectUntil(log.subscribeToAll({ filter }), ({ events }) => events.length >= 5, 5_000);
        expect(ids(heard.events)).toEqual(leaderIds);
      },
      append: async (log) => {
        await expect(log.append(streamId, newEvents(1), 4n)).resolves.toMatchObject({ nextExpectedRevision: 5n });
      },
    };
    for (const [call, check] of Object.entries(firstCalls)) {
      const refusedBefore = follower.refusedAsNotLeader;
      await onFollower(check).catch((error: Error) => {
        throw new Error(`${call} as the first call: ${error.message}`);
      });
      expect({ call, refused: follower.refusedAsNotLeader - refusedBefore }).toEqual({ call, refused: 1 });
    }
  });

  it('appends chain on the leader’s stream and take the ids it holds as duplicates, whoever stored them', async () => {
    await onFollower(async (log) => {
      await expect(log.append(streamId, newEvents(2), 4n)).resolves.toMatchObject({ nextExpectedRevision: 6n });
      // One event per append: its position comes from the append, its check from the read-back.
      await expect(log.append(streamId, newEvents(1), ANY)).resolves.toMatchObject({ nextExpectedRevision: 7n });
      await expect(log.append(streamId, leaderOnly, ANY)).resolves.toMatchObject({ appended: 0 });
    });
    const stored = await onLeader.readStream(streamId);
    expect(stored).toHaveLength(8);
    expectChainHolds(stored);
  });
});

describe('EventStoreDB adapter when another process writes first every time', () => {
  it('answers the caller the port’s conflict after five plans, storing none of its events', async () => {
    const double = await startEventStoreDouble();
    const log = createEventStoreDbEventLog({ connectionString: double.connectionString });
    const streamId = `${uniquePrefix('contended')}s`;
    // Another ledger process: its events carry the metadata ours do (here only the chain hash the next plan reads).
    const otherProcessEvent = () => ({
      id: randomUUID(),
      type: 'test.other',
      contentType: 'application/json',
      data: Buffer.from('{}'),
      customMetadata: Buffer.from(JSON.stringify({ hash: randomBytes(32).toString('hex') })),
    });
    let cutIns = 0;
    const stopCuttingIn = double.store.cutInBeforeAppends(streamId, () => {
      cutIns += 1;
      double.store.append(streamId, { kind: 'any' }, [otherProcessEvent()]);
    });
    try {
      const refused = log.append(streamId, newEvents(2), ANY);
      await expect(refused).rejects.toBeInstanceOf(WrongExpectedRevisionError);
      await expect(refused).rejects.toMatchObject({ streamId, expected: ANY });
      // Five plans, each beaten by the other process.
      expect(cutIns).toBe(5);
      expect(double.store.stream(streamId)!.map((event) => event.type)).toEqual(Array(5).fill('test.other'));
    } finally {
      stopCuttingIn();
      await log.close();
      await double.stop();
    }
  });
});
