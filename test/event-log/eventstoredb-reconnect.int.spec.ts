import { randomBytes, randomUUID } from 'node:crypto';
import http2 from 'node:http2';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import esdb from '@eventstore/db-client';
import {
  ANY,
  databaseFailure,
  EventLogClosedError,
  NO_STREAM,
  WrongExpectedRevisionError,
  type RecordedEvent,
} from '#event-log';
import { createEventStoreDbEventLog } from '#event-log/eventstoredb';
import { isStrictlyIncreasing, newEvents, positions, uniquePrefix } from '#event-log/testing';
import {
  DEFAULT_MAX_APPEND_SIZE,
  startEventStoreDouble,
  type EventStoreDouble,
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

  it('appends and a subscriber in flight when the connection is reset under them are retried: each event stored once, none missed', async () => {
    // The client's HTTP/2 sessions, reset from this side as a dropped transport resets them: calls in flight end
    // with no gRPC status (INTERNAL), or as unavailable or cancelled.
    const sessions: http2.ClientHttp2Session[] = [];
    const connect = http2.connect;
    http2.connect = ((...args: Parameters<typeof connect>) => {
      const session = connect(...args);
      sessions.push(session);
      return session;
    }) as typeof connect;
    const dropped: Error[] = [];
    const log = createEventStoreDbEventLog({
      connectionString: double.connectionString,
      retryDelayMs: 20,
      onError: (error) => dropped.push(error),
    });
    const prefix = uniquePrefix('reset');
    const received: RecordedEvent[] = [];
    const subscription = log.subscribeToAll({
      fromPosition: await log.headPosition(),
      filter: { streamPrefixes: [prefix] },
    });
    const consuming = (async () => {
      for await (const batch of subscription) received.push(...batch.events);
    })();
    const writers = 8;
    const rounds = 40;
    try {
      const sent = Array.from({ length: writers }, () => [] as string[]);
      const writing = Promise.all(
        sent.map(async (ids, writer) => {
          for (let round = 0; round < rounds; round += 1) {
            const events = newEvents(round % 2 === 0 ? 1 : 5);
            await log.append(`${prefix}${writer}`, events, ANY);
            ids.push(...events.map((event) => event.id));
          }
        }),
      );
      await until(() => received.length >= 40, 'the first events');
      expect(sessions.length).toBeGreaterThan(0);
      for (const session of sessions) session.destroy();
      await writing;
      // The reset was met and retried, not slipped between calls.
      expect(dropped.length).toBeGreaterThan(0);
      const total = writers * (rounds / 2) * 6;
      await until(() => received.length >= total, 'every event after the reset');
      expect(received).toHaveLength(total);
      expect(isStrictlyIncreasing(positions(received))).toBe(true);
      for (const [writer, ids] of sent.entries())
        expect((await log.readStream(`${prefix}${writer}`)).map((event) => event.id)).toEqual(ids);
    } finally {
      http2.connect = connect;
      await subscription.close();
      await consuming;
      await log.close();
    }
  });
});

describe('EventStoreDB adapter when the server stays away or says nothing', () => {
  /** Each operation fails as a database failure the API answers with 503: `lost`, since a write may have landed. */
  const failsAsLost = async (operation: Promise<unknown>) => {
    const error = await operation.then(
      () => undefined,
      (failure: unknown) => failure,
    );
    expect(error).toBeInstanceOf(Error);
    expect(databaseFailure(error)).toBe('lost');
    return error as Error;
  };

  it('an outage longer than the retries fails appends and reads as lost; the same append is stored once when it is back', async () => {
    const double = await startEventStoreDouble();
    const log = createEventStoreDbEventLog({
      connectionString: double.connectionString,
      appendAttempts: 2,
      retryDelayMs: 10,
    });
    const streamId = `${uniquePrefix('outage')}s`;
    try {
      await log.append(streamId, newEvents(2), NO_STREAM);
      await double.stop();
      const events = newEvents(3);
      await failsAsLost(log.append(streamId, events, 1n));
      await failsAsLost(log.readStream(streamId));
      await failsAsLost(log.readAll({ fromPosition: 0n }));
      await double.start();
      await expect(log.append(streamId, events, 1n)).resolves.toMatchObject({ nextExpectedRevision: 4n });
      expect((await log.readStream(streamId)).map((event) => event.id).slice(2)).toEqual(
        events.map((event) => event.id),
      );
    } finally {
      await log.close();
      await double.stop();
    }
  });

  it('an append the server stored but never answered fails as lost; its stream goes on, the retry is stored once, and close sends nothing after', async () => {
    const double = await startEventStoreDouble();
    const log = createEventStoreDbEventLog({ connectionString: double.connectionString, answerTimeoutMs: 300 });
    const streamId = `${uniquePrefix('unanswered')}s`;
    try {
      await log.append(streamId, newEvents(2), NO_STREAM);
      double.leaveUnanswered(1);
      const events = newEvents(3);
      await failsAsLost(log.append(streamId, events, 1n));
      // The stream is not held by the unanswered call: the retry with the same ids is met as a duplicate.
      await expect(log.append(streamId, events, 1n)).resolves.toMatchObject({ nextExpectedRevision: 4n });
      await expect(log.append(streamId, newEvents(1), ANY)).resolves.toMatchObject({ nextExpectedRevision: 5n });
      expect(double.store.stream(streamId)).toHaveLength(6);

      // Frozen under one append with another queued behind it: close refuses the queued one rather than send it.
      // Its caller's own bound and close's wait end together: it is refused either way, and never sent.
      double.leaveUnanswered(1);
      const underWay = failsAsLost(log.append(streamId, newEvents(1), ANY));
      const queued = newEvents(1);
      const behind = log.append(streamId, queued, ANY).then(
        () => 'stored',
        (error: unknown) => (error instanceof EventLogClosedError ? 'closed' : databaseFailure(error)),
      );
      await log.close();
      await underWay;
      expect(['closed', 'lost']).toContain(await behind);
      // Closed, it sends nothing more, to a stream it has a writer for or not.
      await expect(log.append(`${streamId}-after`, newEvents(1), NO_STREAM)).rejects.toBeInstanceOf(
        EventLogClosedError,
      );
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(double.store.stream(streamId)!.map((event) => event.id)).not.toContain(queued[0].id);
      expect(double.store.stream(`${streamId}-after`)).toBeUndefined();
    } finally {
      await log.close();
      await double.stop();
    }
  });

  it('a subscription idle past the answer time asks the server, which answers: it stays, and gets what follows', async () => {
    const double = await startEventStoreDouble();
    const problems: Error[] = [];
    const log = createEventStoreDbEventLog({
      connectionString: double.connectionString,
      answerTimeoutMs: 100,
      onError: (error) => problems.push(error),
    });
    const streamId = `${uniquePrefix('idle')}s`;
    const received: RecordedEvent[] = [];
    const subscription = log.subscribeToAll({
      fromPosition: await log.headPosition(),
      filter: { streamPrefixes: [streamId] },
    });
    const consuming = (async () => {
      for await (const batch of subscription) received.push(...batch.events);
    })();
    try {
      await log.append(streamId, newEvents(3), NO_STREAM);
      await until(() => received.length === 3, 'the first events');
      const reads = double.readsOfAll;
      await until(() => double.readsOfAll >= reads + 3, 'three probes while idle');
      await log.append(streamId, newEvents(3), 2n);
      await until(() => received.length === 6, 'the events after the idle time');
      expect(received.map((event) => event.revision)).toEqual([0n, 1n, 2n, 3n, 4n, 5n]);
      expect(problems).toEqual([]);
    } finally {
      await subscription.close();
      await consuming;
      await log.close();
      await double.stop();
    }
  });

  it('a read longer than the answer time, at a busy server’s pace, is not cut: the bound is on silence', async () => {
    const double = await startEventStoreDouble();
    const log = createEventStoreDbEventLog({ connectionString: double.connectionString, answerTimeoutMs: 300 });
    const streamId = `${uniquePrefix('paced')}s`;
    try {
      await log.append(streamId, newEvents(12), NO_STREAM);
      double.paceReads(100);
      const started = Date.now();
      expect(await log.readStream(streamId)).toHaveLength(12);
      // About 1.2 s in all, four times the bound, with no gap of more than a third of it.
      expect(Date.now() - started).toBeGreaterThan(900);
    } finally {
      await log.close();
      await double.stop();
    }
  });

  it('a server that takes the connection and never answers: every operation fails as lost after the answer time, and close returns', async () => {
    // The client bounds neither the connection's setup nor a BatchAppend answer: without the adapter's bound these wait for ever.
    const sockets: Socket[] = [];
    const silent = createServer((socket) => sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const problems: Error[] = [];
    const log = createEventStoreDbEventLog({
      connectionString: `esdb://127.0.0.1:${(silent.address() as AddressInfo).port}?tls=false`,
      answerTimeoutMs: 300,
      retryDelayMs: 10,
      onError: (error) => problems.push(error),
    });
    try {
      const error = await failsAsLost(log.append('silent-stream', newEvents(1), NO_STREAM));
      expect(error.message).toBe('EventStoreDB did not answer within 300 ms');
      await failsAsLost(log.append('silent-stream', newEvents(1), ANY));
      await failsAsLost(log.readStream('silent-stream'));
      await failsAsLost(log.headPosition());
      await failsAsLost(log.health());
      expect(sockets.length).toBeGreaterThan(0);

      // A subscription waits for events, which a quiet log does not send either: idle, it asks for the head, and
      // made again each time that goes unanswered, it says so rather than wait unlogged.
      const subscription = log.subscribeToAll({ fromPosition: 0n });
      const consuming = (async () => {
        for await (const batch of subscription) void batch;
      })();
      await until(() => problems.length >= 2, 'two unanswered probes');
      expect(problems.every((problem) => databaseFailure(problem) === 'lost')).toBe(true);
      await subscription.close();
      await consuming;
    } finally {
      await log.close();
      for (const socket of sockets) socket.destroy();
      silent.close();
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
      // What the double does not implement is refused with a status, not left hanging.
      const subscription = client.subscribeToStream('plain-append');
      await expect(
        new Promise((resolve, reject) => subscription.on('data', resolve).on('error', reject)),
      ).rejects.toMatchObject({ code: 12 });
    } finally {
      await client.dispose();
      await double.stop();
    }
  });
});

describe('EventStoreDB adapter when another process writes first every time', () => {
  it('answers the port’s conflict, with the stream’s true head, to what five writes could not store, and duplicates to the rest', async () => {
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
    const stored = newEvents(2);
    await log.append(streamId, stored, NO_STREAM);
    let cutIns = 0;
    const stopCuttingIn = double.store.cutInBeforeAppends(streamId, () => {
      cutIns += 1;
      double.store.append(streamId, { kind: 'any' }, [otherProcessEvent()]);
    });
    try {
      // The first goes alone; the next two wait behind it and go as one group, a retry of stored ids among them.
      const [alone, retry, grouped] = await Promise.allSettled([
        log.append(streamId, newEvents(1), ANY),
        log.append(streamId, stored, 1n),
        log.append(streamId, newEvents(2), ANY),
      ]);
      const head = BigInt(double.store.stream(streamId)!.length - 1);
      expect(alone).toMatchObject({ status: 'rejected', reason: expect.any(WrongExpectedRevisionError) });
      expect(retry).toMatchObject({
        status: 'fulfilled',
        value: { appended: 0, duplicates: stored.map(({ id }) => id) },
      });
      expect(grouped).toMatchObject({ status: 'rejected', reason: { streamId, expected: ANY, actual: head } });
      expect((grouped as PromiseRejectedResult).reason).toBeInstanceOf(WrongExpectedRevisionError);
      // Five writes for each group, each beaten by the other process; none of the new events stored.
      expect(cutIns).toBe(10);
      expect(double.store.stream(streamId)!.map((event) => event.type)).toEqual([
        ...stored.map(({ type }) => type),
        ...Array(10).fill('test.other'),
      ]);
    } finally {
      stopCuttingIn();
      await log.close();
      await double.stop();
    }
  });
});
