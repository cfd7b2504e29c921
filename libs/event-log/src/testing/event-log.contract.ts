import { randomUUID } from 'node:crypto';
import { chainHash, GENESIS_HASH } from '#core';
import { InvalidEventError, WrongExpectedRevisionError } from '../errors.js';
import {
  ANY,
  NO_STREAM,
  STREAM_EXISTS,
  type AppendResult,
  type EventFilter,
  type EventLog,
  type HashedEvent,
  type ProjectionEvent,
  type ExpectedRevision,
  type NewEvent,
  type ReadStreamOptions,
  type RecordedEvent,
} from '../event-log.js';
import { readStreamAfterPosition } from '../stream-page.js';
import { collectUntil, isStrictlyIncreasing, newEvents, positions, uniquePrefix } from './fixtures.js';

/** A log under test. `connect()` opens another adapter instance on the same store, as a second process would. */
export interface EventLogContractSubject {
  connect(): Promise<EventLog>;
  teardown(): Promise<void>;
}

/** What may differ between engines without breaking the port's promises. */
export interface EventLogQuirks {
  /** How long a subscriber may take to see an append; bounds the waits, it is not a timing assertion. */
  readonly deliveryTimeoutMs?: number;
  /**
   * Event data this engine refuses to store although it passes the port's own checks (PostgreSQL's
   * jsonb refuses a NUL character; EventStoreDB an append over its maximum append size).
   */
  readonly refusedData: unknown;
  /** Whether a multi-stream append is one transaction (PostgreSQL), or its parts go one by one (EventStoreDB). */
  readonly atomicMultiStream: boolean;
}

/**
 * The event-log port's contract. Each adapter's spec calls this with its own factory, so every
 * engine passes the very same tests.
 */
export function eventLogContract(
  name: string,
  setup: () => Promise<EventLogContractSubject>,
  quirks: EventLogQuirks,
): void {
  const timeout = quirks.deliveryTimeoutMs ?? 30_000;

  describe(`event log contract: ${name}`, () => {
    let subject: EventLogContractSubject;
    let log: EventLog;
    const extra: EventLog[] = [];

    beforeAll(async () => {
      subject = await setup();
      log = await subject.connect();
    });
    afterAll(async () => {
      await Promise.all([log, ...extra].map((instance) => instance.close()));
      await subject.teardown();
    });

    async function conflictOf(streamId: string, expected: ExpectedRevision): Promise<WrongExpectedRevisionError> {
      const error = await log.append(streamId, newEvents(1), expected).then(
        () => undefined,
        (thrown: unknown) => thrown,
      );
      expect(error).toBeInstanceOf(WrongExpectedRevisionError);
      return error as WrongExpectedRevisionError;
    }

    describe('append and read a stream', () => {
      it('numbers revisions from 0, orders positions, fills metadata and chains hashes', async () => {
        const streamId = `${uniquePrefix('s')}chain`;
        const events = newEvents(3, 'test.chained').map((event, index) => ({
          ...event,
          correlationId: 'corr-1',
          causationId: index === 0 ? undefined : 'cause',
        }));
        const result = await log.append(streamId, events, NO_STREAM);
        expect(result).toMatchObject({ nextExpectedRevision: 2n, appended: 3, duplicates: [] });

        const stored = await log.readStream(streamId);
        expect(stored.map((event) => event.id)).toEqual(events.map((event) => event.id));
        expect(stored.map((event) => event.revision)).toEqual([0n, 1n, 2n]);
        // The append reports its events exactly as a read returns them: callers need no read-back.
        expect(result.events).toEqual(stored);
        expect(isStrictlyIncreasing(positions(stored))).toBe(true);
        expect(stored[2].position).toBe(result.position);
        expect(stored[0].data).toEqual({ index: 0 });
        expect(stored[1].metadata).toMatchObject({
          schemaVersion: 1,
          correlationId: 'corr-1',
          causationId: 'cause',
          actor: 'anonymous',
          tenant: 'default',
        });
        expect(Number.isNaN(Date.parse(stored[0].metadata.recordedAt))).toBe(false);
        expectChainHolds(stored);
      });

      it('keeps tenant and actor given by the appender', async () => {
        const streamId = `${uniquePrefix('s')}tenant`;
        await log.append(
          streamId,
          newEvents(1).map((event) => ({ ...event, tenant: 'acme', actor: 'key-42', schemaVersion: 2 })),
          NO_STREAM,
        );
        const [stored] = await log.readStream(streamId);
        expect(stored.metadata).toMatchObject({ tenant: 'acme', actor: 'key-42', schemaVersion: 2 });
      });

      it('reads a missing stream as empty', async () => {
        expect(await log.readStream(`${uniquePrefix('s')}missing`)).toEqual([]);
        expect(await log.readStream(`${uniquePrefix('s')}missing`, { direction: 'backwards' })).toEqual([]);
      });

      it('reads from a revision, backwards, and up to a count', async () => {
        const streamId = `${uniquePrefix('s')}ranges`;
        await log.append(streamId, newEvents(5), NO_STREAM);
        const revisions = (events: readonly RecordedEvent[]) => events.map((event) => event.revision);
        expect(revisions(await log.readStream(streamId, { fromRevision: 3n }))).toEqual([3n, 4n]);
        expect(revisions(await log.readStream(streamId, { direction: 'backwards' }))).toEqual([4n, 3n, 2n, 1n, 0n]);
        expect(
          revisions(await log.readStream(streamId, { direction: 'backwards', fromRevision: 2n, maxCount: 2 })),
        ).toEqual([2n, 1n]);
        expect(revisions(await log.readStream(streamId, { maxCount: 2 }))).toEqual([0n, 1n]);
        expect(revisions(await log.readStream(streamId, { fromRevision: 1n, maxCount: 2 }))).toEqual([1n, 2n]);
      });

      it('pages a stream after a global position reading only bounded slices of it', async () => {
        const prefix = uniquePrefix('s');
        const [streamId, otherId] = [`${prefix}paged`, `${prefix}between`];
        // Another stream's events in between, so the stream's positions have gaps.
        for (let round = 0; round < 20; round += 1) {
          await log.append(streamId, newEvents(2), ANY);
          await log.append(otherId, newEvents(1), ANY);
        }
        const all = await log.readStream(streamId);
        const calls: ReadStreamOptions[] = [];
        let rowsRead = 0;
        let mostRowsForOnePage = 0;
        const counting = {
          readStream: async (id: string, options: ReadStreamOptions = {}) => {
            calls.push(options);
            const events = await log.readStream(id, options);
            rowsRead += events.length;
            return events;
          },
        };
        const page = async (after: bigint, maxCount: number) => {
          rowsRead = 0;
          const events = await readStreamAfterPosition(counting, streamId, after, maxCount);
          mostRowsForOnePage = Math.max(mostRowsForOnePage, rowsRead);
          return events;
        };
        const revisions = (events: readonly RecordedEvent[]) => events.map((event) => event.revision);

        expect(revisions(await page(0n, 3))).toEqual([0n, 1n, 2n]);
        expect(revisions(await page(all[17].position, 3))).toEqual([18n, 19n, 20n]);
        const gap = all[17].position + 1n; // the other stream's event after revision 17
        expect(all[18].position).toBeGreaterThan(gap);
        expect(revisions(await page(gap, 3))).toEqual([18n, 19n, 20n]);
        expect(revisions(await page(all[38].position, 3))).toEqual([39n]);
        expect(await page(all[39].position, 3)).toEqual([]);
        expect(await readStreamAfterPosition(log, `${prefix}missing`, 5n, 3)).toEqual([]);
        // Every read is bounded: a page costs its rows, the stream's last event and a bisection
        // (log2 of 40 single rows).
        expect(calls.every((options) => options.maxCount !== undefined && options.maxCount <= 3)).toBe(true);
        expect(mostRowsForOnePage).toBeLessThanOrEqual(3 + 1 + Math.ceil(Math.log2(all.length)));
      });

      it('refuses an event that is not storable and stores nothing of its batch', async () => {
        const streamId = `${uniquePrefix('s')}invalid`;
        const batch = [...newEvents(1), { id: 'not-a-uuid', type: 'test.bad', data: {} }];
        await expect(log.append(streamId, batch, ANY)).rejects.toBeInstanceOf(InvalidEventError);
        await expect(log.append(streamId, [], ANY)).rejects.toBeInstanceOf(InvalidEventError);
        // Refused before it is queued: values a later step would trip on, inside a commit shared with other appends.
        const [good] = newEvents(1);
        const refused: [Record<string, unknown>, string][] = [
          [{ id: [good.id] }, 'events[1].id'],
          [{ id: { toString: () => good.id } }, 'events[1].id'],
          [{ id: 5n }, 'events[1].id'],
          [{ data: { n: 2n ** 60n } }, 'events[1].data'],
          [{ data: { at: new Date(0) } }, 'events[1].data'],
          [{ data: [new Number(5)] }, 'events[1].data'],
        ];
        for (const [fields, field] of refused) {
          const batch = [...newEvents(1), { ...good, ...fields }];
          await expect(log.append(streamId, batch, ANY)).rejects.toMatchObject({ name: 'InvalidEventError', field });
        }
        expect(await log.readStream(streamId)).toEqual([]);
      });

      it('stores the data as it was when append was called, as its hash covers it', async () => {
        const streamId = `${uniquePrefix('s')}snapshot`;
        const data = { v: 1, nested: { list: [1, 2] } };
        const appending = log.append(streamId, [{ ...newEvents(1)[0], data }], ANY);
        data.v = 2;
        data.nested.list.push(3);
        await appending;
        const [stored] = await log.readStream(streamId);
        expect(stored.data).toEqual({ v: 1, nested: { list: [1, 2] } });
        expectChainHolds([stored]);
      });

      it('refuses an envelope the hash or the store cannot take, naming the field, and stores nothing of its batch', async () => {
        const streamId = `${uniquePrefix('s')}envelope`;
        const refused: [Record<string, unknown>, string][] = [
          [{ schemaVersion: Number.NaN }, 'events[1].schemaVersion'],
          [{ schemaVersion: 1.5 }, 'events[1].schemaVersion'],
          [{ schemaVersion: 0 }, 'events[1].schemaVersion'],
          [{ schemaVersion: 2 ** 31 }, 'events[1].schemaVersion'],
          [{ schemaVersion: '1' }, 'events[1].schemaVersion'],
          [{ tenant: 42 }, 'events[1].tenant'],
          [{ actor: { name: 'x' } }, 'events[1].actor'],
          [{ correlationId: 7n }, 'events[1].correlationId'],
          [{ causationId: null }, 'events[1].causationId'],
        ];
        for (const [envelope, field] of refused) {
          const batch = [...newEvents(1), { ...newEvents(1)[0], ...envelope }];
          await expect(log.append(streamId, batch, ANY)).rejects.toMatchObject({ name: 'InvalidEventError', field });
          await expect(log.appendMany([{ streamId, events: batch, expectedRevision: ANY }])).rejects.toMatchObject({
            field,
          });
        }
        expect(await log.readStream(streamId)).toEqual([]);
        const highest = { ...newEvents(1)[0], schemaVersion: 2 ** 31 - 1 };
        await log.append(streamId, [highest], ANY);
        expect((await log.readStream(streamId))[0].metadata.schemaVersion).toBe(2 ** 31 - 1);
      });

      it('stores texts built to break out of the stored row as text, and refuses an id that is not a UUID', async () => {
        const streamId = `${uniquePrefix('s')}breakout`;
        // Each would move the row to another stream or envelope, or change its hash, if written into the row unescaped.
        const breakouts = ['","stream":0,"hash":"00', '"}],"x":[{"', '\\', '\u2028\ud83d\ude00 \t', "'; --"];
        const events = breakouts.map((text, index) => ({
          id: randomUUID(),
          type: `test.${text}`,
          data: { text },
          causationId: text,
          correlationId: text,
          actor: text,
          tenant: `t${index}${text}`,
        }));
        await log.append(streamId, events, NO_STREAM);
        const stored = await log.readStream(streamId);
        expect(
          stored.map(({ type, data, metadata: { causationId, correlationId, actor, tenant } }) => [
            type,
            data,
            causationId,
            correlationId,
            actor,
            tenant,
          ]),
        ).toEqual(breakouts.map((text, index) => [`test.${text}`, { text }, text, text, text, `t${index}${text}`]));
        expectChainHolds(stored);
        const badIds = [`${randomUUID()}"`, `${randomUUID()}\n`, `"${randomUUID().slice(1)}`];
        for (const id of badIds) {
          const batch = [...newEvents(1), { ...newEvents(1)[0], id }];
          await expect(log.append(streamId, batch, ANY)).rejects.toMatchObject({ field: 'events[1].id' });
        }
        expect(await log.readStream(streamId)).toHaveLength(breakouts.length);
      });

      it('stores what it checked when a member answers each read differently, beside another caller in the same commit', async () => {
        const prefix = uniquePrefix('s');
        const id = randomUUID();
        const reads = { id: 0, schemaVersion: 0 };
        const breakout = '","stream":1,"revision":1,"x":"';
        const shifty = { type: 'test.shifty', data: { n: 1 } };
        Object.defineProperty(shifty, 'id', {
          enumerable: true,
          get: () => (++reads.id === 1 ? id : `${id}${breakout}`),
        });
        Object.defineProperty(shifty, 'schemaVersion', {
          enumerable: true,
          get: () => (++reads.schemaVersion === 1 ? 1 : `1${breakout}`),
        });
        const [, other] = await Promise.all([
          log.append(`${prefix}attacker`, [shifty as NewEvent], NO_STREAM),
          log.append(`${prefix}victim`, newEvents(1), NO_STREAM),
        ]);
        const [stored] = await log.readStream(`${prefix}attacker`);
        expect(stored).toMatchObject({ id, revision: 0n, metadata: { schemaVersion: 1 } });
        expect(await log.readStream(`${prefix}victim`)).toEqual(other.events);
        expectChainHolds([stored]);
        await expect(log.append(`${prefix}victim`, newEvents(1), 0n)).resolves.toMatchObject({ appended: 1 });
      });
    });

    describe('expected revision', () => {
      it('no_stream succeeds on a missing stream and conflicts on an existing one', async () => {
        const streamId = `${uniquePrefix('s')}ns`;
        await log.append(streamId, newEvents(2), NO_STREAM);
        const error = await conflictOf(streamId, NO_STREAM);
        expect(error).toMatchObject({ streamId, expected: NO_STREAM, actual: 1n });
      });

      it('stream_exists conflicts on a missing stream and succeeds on an existing one', async () => {
        const streamId = `${uniquePrefix('s')}se`;
        expect(await conflictOf(streamId, STREAM_EXISTS)).toMatchObject({ expected: STREAM_EXISTS, actual: NO_STREAM });
        await log.append(streamId, newEvents(1), ANY);
        await expect(log.append(streamId, newEvents(1), STREAM_EXISTS)).resolves.toMatchObject({
          nextExpectedRevision: 1n,
        });
      });

      it('an exact revision succeeds when current and conflicts when stale or ahead', async () => {
        const streamId = `${uniquePrefix('s')}rev`;
        const first = await log.append(streamId, newEvents(2), NO_STREAM);
        const second = await log.append(streamId, newEvents(1), first.nextExpectedRevision);
        expect(second.nextExpectedRevision).toBe(2n);
        expect(await conflictOf(streamId, first.nextExpectedRevision)).toMatchObject({ expected: 1n, actual: 2n });
        expect(await conflictOf(streamId, 7n)).toMatchObject({ expected: 7n, actual: 2n });
        expect(await conflictOf(`${uniquePrefix('s')}rev-missing`, 0n)).toMatchObject({
          expected: 0n,
          actual: NO_STREAM,
        });
        expect(await log.readStream(streamId)).toHaveLength(3);
      });

      it('any succeeds on missing and existing streams', async () => {
        const streamId = `${uniquePrefix('s')}any`;
        await expect(log.append(streamId, newEvents(1), ANY)).resolves.toMatchObject({ nextExpectedRevision: 0n });
        await expect(log.append(streamId, newEvents(1), ANY)).resolves.toMatchObject({ nextExpectedRevision: 1n });
      });

      it('a conflicting append in a concurrent group fails alone', async () => {
        const prefix = uniquePrefix('s');
        await log.append(`${prefix}a`, newEvents(1), NO_STREAM);
        const results = await Promise.allSettled([
          log.append(`${prefix}a`, newEvents(1), NO_STREAM),
          log.append(`${prefix}b`, newEvents(2), NO_STREAM),
          log.append(`${prefix}a`, newEvents(1), 0n),
        ]);
        expect(results.map((result) => result.status)).toEqual(['rejected', 'fulfilled', 'fulfilled']);
        expect(await log.readStream(`${prefix}a`)).toHaveLength(2);
        expect(await log.readStream(`${prefix}b`)).toHaveLength(2);
      });
    });

    describe('several streams in one append', () => {
      it('stores each part in its stream and answers per part, in order', async () => {
        const prefix = uniquePrefix('s');
        await log.append(`${prefix}b`, newEvents(1), NO_STREAM);
        const results = await log.appendMany([
          { streamId: `${prefix}a`, events: newEvents(2), expectedRevision: NO_STREAM },
          { streamId: `${prefix}b`, events: newEvents(1), expectedRevision: 0n },
        ]);
        expect(results).toMatchObject([
          { nextExpectedRevision: 1n, appended: 2 },
          { nextExpectedRevision: 1n, appended: 1 },
        ]);
        expect(results[1].position).toBeGreaterThan(results[0].position);
        expect(await log.readStream(`${prefix}a`)).toEqual(results[0].events);
        expect((await log.readStream(`${prefix}b`)).slice(1)).toEqual(results[1].events);
      });

      const failsFrom = quirks.atomicMultiStream ? ' whole' : ' from that part on';
      it(`a conflicting part fails the append${failsFrom}`, async () => {
        const prefix = uniquePrefix('s');
        await log.append(`${prefix}b`, newEvents(1), NO_STREAM);
        const error = await log
          .appendMany([
            { streamId: `${prefix}a`, events: newEvents(1), expectedRevision: NO_STREAM },
            { streamId: `${prefix}b`, events: newEvents(1), expectedRevision: NO_STREAM },
            { streamId: `${prefix}c`, events: newEvents(1), expectedRevision: NO_STREAM },
          ])
          .then(
            () => undefined,
            (thrown: unknown) => thrown,
          );
        expect(error).toBeInstanceOf(WrongExpectedRevisionError);
        expect(error).toMatchObject({ streamId: `${prefix}b`, expected: NO_STREAM, actual: 0n });
        expect(await log.readStream(`${prefix}a`)).toHaveLength(quirks.atomicMultiStream ? 0 : 1);
        expect(await log.readStream(`${prefix}b`)).toHaveLength(1);
        expect(await log.readStream(`${prefix}c`)).toHaveLength(0);
      });

      it('a conflicting multi-stream append among concurrent appends fails alone', async () => {
        const prefix = uniquePrefix('s');
        await log.append(`${prefix}a`, newEvents(1), NO_STREAM);
        const results = await Promise.allSettled([
          log.append(`${prefix}a`, newEvents(1), 0n),
          log.appendMany([
            { streamId: `${prefix}c`, events: newEvents(1), expectedRevision: NO_STREAM },
            { streamId: `${prefix}a`, events: newEvents(1), expectedRevision: 0n },
          ]),
          log.appendMany([
            { streamId: `${prefix}a`, events: newEvents(1), expectedRevision: 1n },
            { streamId: `${prefix}b`, events: newEvents(2), expectedRevision: NO_STREAM },
          ]),
        ]);
        expect(results.map((result) => result.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
        expect(await log.readStream(`${prefix}a`)).toHaveLength(3);
        expect(await log.readStream(`${prefix}b`)).toHaveLength(2);
        expect(await log.readStream(`${prefix}c`)).toHaveLength(quirks.atomicMultiStream ? 0 : 1);
      });
    });

    describe('two writers on one stream (two processes)', () => {
      it('the second writer with a stale revision gets a conflict, not a fork of the stream', async () => {
        const streamId = `${uniquePrefix('s')}contended`;
        const other = await subject.connect();
        extra.push(other);
        const first = await log.append(streamId, newEvents(1), NO_STREAM);
        // Both instances have now seen revision 0.
        expect(await other.readStream(streamId)).toHaveLength(1);
        await other.append(streamId, newEvents(1), first.nextExpectedRevision);
        const error = await log.append(streamId, newEvents(1), first.nextExpectedRevision).then(
          () => undefined,
          (thrown: unknown) => thrown,
        );
        expect(error).toBeInstanceOf(WrongExpectedRevisionError);
        expect(error).toMatchObject({ expected: 0n, actual: 1n });
        expect((await log.readStream(streamId)).map((event) => event.revision)).toEqual([0n, 1n]);
      });

      it('writers alternating with `any` keep one contiguous, correctly chained stream', async () => {
        const streamId = `${uniquePrefix('s')}alternating`;
        const other = await subject.connect();
        extra.push(other);
        const reported: RecordedEvent[] = [];
        for (let round = 0; round < 6; round += 1)
          reported.push(...(await (round % 2 === 0 ? log : other).append(streamId, newEvents(2), ANY)).events);
        const stored = await other.readStream(streamId);
        expect(stored.map((event) => event.revision)).toEqual(Array.from({ length: 12 }, (_, index) => BigInt(index)));
        expect(reported).toEqual(stored);
        stored.forEach((event, index) =>
          expect(event.metadata.prevHash).toBe(index === 0 ? GENESIS_HASH : stored[index - 1].metadata.hash),
        );
      });

      it('a writer sending ids the other one stored since it last looked reports duplicates and keeps the chain', async () => {
        const streamId = `${uniquePrefix('s')}same-ids`;
        const other = await subject.connect();
        extra.push(other);
        const [first] = (await log.append(streamId, newEvents(1), NO_STREAM)).events;
        // A producer's retry reaching the other instance: `log` has not seen what `other` stored. Events sealed in
        // one millisecond by both would be identical (hash and all), so each retry is sealed a millisecond later.
        const afterNextTick = async () => {
          for (const at = Date.now(); Date.now() === at;) await new Promise((resolve) => setImmediate(resolve));
        };
        for (const sent of [newEvents(1), newEvents(2)]) {
          const stored = await other.append(streamId, sent, ANY);
          await afterNextTick();
          expect(await log.append(streamId, sent, ANY)).toEqual(allDuplicates(sent, stored));
        }
        // Sent as two appends queued together behind one in flight (a retry of `log`'s first event).
        const sent = newEvents(2);
        const stored = await other.append(streamId, sent, ANY);
        await afterNextTick();
        const [, ...retried] = await Promise.all([
          log.append(streamId, [{ id: first.id, type: first.type, data: first.data }], ANY),
          ...sent.map((event) => log.append(streamId, [event], ANY)),
        ]);
        expect(retried).toEqual(
          stored.events.map((event, index) => allDuplicates([sent[index]], { ...stored, position: event.position })),
        );
        const next = await log.append(streamId, newEvents(1), ANY);
        const stream = await other.readStream(streamId);
        expect(stream.map((event) => event.revision)).toEqual([0n, 1n, 2n, 3n, 4n, 5n, 6n]);
        expect(next.events).toEqual(stream.slice(6));
        expectChainHolds(stream);
      });

      it('a writer whose view of the stream is behind appends at the revision the stream is at', async () => {
        const streamId = `${uniquePrefix('s')}behind`;
        const other = await subject.connect();
        extra.push(other);
        await log.append(streamId, newEvents(1), NO_STREAM);
        const moved = await other.append(streamId, newEvents(1), ANY);
        const appended = await log.append(streamId, newEvents(1), moved.nextExpectedRevision);
        expect(appended).toMatchObject({ appended: 1, nextExpectedRevision: moved.nextExpectedRevision + 1n });
        expectChainHolds(await other.readStream(streamId));
      });
    });

    describe('idempotent retries', () => {
      it('an exact retry of an acknowledged batch stores nothing and reports every event as a duplicate', async () => {
        const streamId = `${uniquePrefix('s')}retry`;
        const batch = newEvents(3);
        const first = await log.append(streamId, batch, NO_STREAM);
        const retry = await log.append(streamId, batch, NO_STREAM);
        expect(retry).toEqual(allDuplicates(batch, first));
        expect(await log.readStream(streamId)).toHaveLength(3);
      });

      it('an exact retry with `any` stores nothing and reports every event as a duplicate', async () => {
        const streamId = `${uniquePrefix('s')}retry-any`;
        const batch = newEvents(2);
        const first = await log.append(streamId, batch, ANY);
        const retry = await log.append(streamId, batch, ANY);
        expect(retry).toMatchObject({ appended: 0, position: first.position, events: [] });
        expect(retry.duplicates).toEqual(batch.map((event) => event.id));
        expect(await log.readStream(streamId)).toEqual(first.events);
      });

      it('a batch mixing known and new events stores only the new ones', async () => {
        const streamId = `${uniquePrefix('s')}mixed`;
        const [known, ...rest] = newEvents(3);
        await log.append(streamId, [known], NO_STREAM);
        const result = await log.append(streamId, [known, ...rest], ANY);
        expect(result).toMatchObject({ appended: 2, duplicates: [known.id], nextExpectedRevision: 2n });
        const stored = await log.readStream(streamId);
        expect(stored.map((event) => event.id)).toEqual([known.id, ...rest.map((event) => event.id)]);
        expect(result.events).toEqual(stored.slice(1));
      });

      it('concurrent retries of one batch store it once', async () => {
        const streamId = `${uniquePrefix('s')}race`;
        const batch = newEvents(2);
        const results = await Promise.all(Array.from({ length: 5 }, () => log.append(streamId, batch, ANY)));
        expect(results.reduce((sum, result) => sum + result.appended, 0)).toBe(2);
        expect(await log.readStream(streamId)).toHaveLength(2);
      });

      it('a retry queued beside its first attempt stores the batch once and answers where its latest event lies', async () => {
        const streamId = `${uniquePrefix('s')}queued-retry`;
        const earlier = newEvents(1);
        const batch = newEvents(2);
        // The first append goes alone, so the batch and its retry queue behind it and are written together. The
        // retry is reordered and names the earlier event too: all duplicates, the latest of them the batch's last.
        const [before, first, retry] = await Promise.all([
          log.append(streamId, earlier, NO_STREAM),
          log.append(streamId, batch, ANY),
          log.append(streamId, [batch[1], earlier[0], batch[0]], ANY),
        ]);
        expect(first).toMatchObject({ appended: 2, nextExpectedRevision: 2n });
        expect(retry).toEqual(allDuplicates([batch[1], earlier[0], batch[0]], first));
        const stored = await log.readStream(streamId);
        expect(stored.map((event) => event.id)).toEqual([...before.events, ...first.events].map((event) => event.id));
      });
    });

    describe('one bad append cannot fail another', () => {
      it('40 concurrent appenders beside one whose data the store refuses: that one alone fails', async () => {
        const prefix = uniquePrefix('s');
        const shared = `${prefix}shared`;
        // Half share a stream with the poisoner (batched per stream), half write their own (batched across streams).
        const innocents = Array.from({ length: 40 }, (_, index) => ({
          streamId: index % 2 === 0 ? shared : `${prefix}own-${index}`,
          events: newEvents(1),
        }));
        const poison = newEvents(1, 'test.poison', () => quirks.refusedData);
        const appends = innocents.map(
          ({ streamId, events }) =>
            () =>
              log.append(streamId, events, ANY),
        );
        appends.splice(20, 0, () => log.append(shared, poison, ANY));
        const outcomes = await Promise.allSettled(appends.map((append) => append()));

        const poisoned = outcomes.splice(20, 1)[0];
        expect(poisoned.status).toBe('rejected');
        expect((poisoned as PromiseRejectedResult).reason).not.toBeInstanceOf(WrongExpectedRevisionError);
        expect(outcomes.filter((outcome) => outcome.status === 'rejected')).toEqual([]);
        const results = outcomes.map((outcome) => (outcome as PromiseFulfilledResult<{ appended: number }>).value);
        expect(results.map((result) => result.appended)).toEqual(innocents.map(() => 1));

        const sharedEvents = await log.readStream(shared);
        const sharedIds = innocents.filter(({ streamId }) => streamId === shared).map(({ events }) => events[0].id);
        expect(new Set(sharedEvents.map((event) => event.id))).toEqual(new Set(sharedIds));
        expect(sharedEvents.map((event) => Number(event.revision))).toEqual([...Array(20).keys()]);
        sharedEvents.forEach((event, index) => {
          expect(event.metadata.prevHash).toBe(index === 0 ? GENESIS_HASH : sharedEvents[index - 1].metadata.hash);
        });
        for (const { streamId, events } of innocents.filter((innocent) => innocent.streamId !== shared)) {
          expect((await log.readStream(streamId)).map((event) => event.id)).toEqual([events[0].id]);
        }
      });
    });

    describe('reading and filtering the whole log', () => {
      it('filters by event-type prefix and by stream prefix, and the checkpoint passes filtered events', async () => {
        const prefix = uniquePrefix('f');
        const start = await log.headPosition();
        await log.append(
          `${prefix}one`,
          [...newEvents(2, 'alpha.created'), ...newEvents(1, 'beta.created')],
          NO_STREAM,
        );
        await log.append(`${prefix}two`, newEvents(2, 'alpha_x.created'), NO_STREAM);
        const last = await log.append(`${prefix.replace('-', '_')}three`, newEvents(1, 'alpha.created'), NO_STREAM);

        const byType = await log.readAll({
          fromPosition: start,
          filter: { eventTypePrefixes: ['alpha.'], streamPrefixes: [prefix] },
        });
        expect(byType.events.map((event) => [event.streamId, event.type])).toEqual([
          [`${prefix}one`, 'alpha.created'],
          [`${prefix}one`, 'alpha.created'],
        ]);
        expect(byType.checkpoint).toBeGreaterThanOrEqual(last.position);
        expect(byType.caughtUp).toBe(true);

        // `_` in a prefix is a character, not a wildcard.
        const byStream = await log.readAll({
          fromPosition: start,
          filter: { streamPrefixes: [`${prefix.replace('-', '_')}`] },
        });
        expect(byStream.events.map((event) => event.streamId)).toEqual([`${prefix.replace('-', '_')}three`]);

        const types = await log.readAll({ fromPosition: start, filter: { eventTypePrefixes: ['beta.', 'alpha_'] } });
        expect(types.events.filter((event) => event.streamId.startsWith(prefix)).map((event) => event.type)).toEqual([
          'beta.created',
          'alpha_x.created',
          'alpha_x.created',
        ]);
      });

      it('pages with maxCount and resumes after the checkpoint', async () => {
        const prefix = uniquePrefix('p');
        const start = await log.headPosition();
        await log.append(`${prefix}a`, newEvents(5), NO_STREAM);
        const filter = { streamPrefixes: [prefix] };
        const first = await log.readAll({ fromPosition: start, maxCount: 3, filter });
        expect(first.events).toHaveLength(3);
        expect(first.caughtUp).toBe(false);
        const rest = await log.readAll({ fromPosition: first.checkpoint, filter });
        expect(rest.events.map((event) => event.revision)).toEqual([3n, 4n]);
      });

      it('refuses a page of fewer than one event, naming maxCount, rather than reading none or all', async () => {
        for (const maxCount of [0, -1, 1.5, Number.NaN])
          for (const read of [
            () => log.readAll({ maxCount }),
            () => log.readAllForProjections({ maxCount }),
            () => log.readAllHashes({ maxCount }),
          ])
            await expect(read()).rejects.toThrow(/^maxCount must be a whole number of 1 or more/);
      });

      it('reads for projections, and for the signer, what the full read gives of the same events, page for page', async () => {
        const prefix = uniquePrefix('nh');
        const start = await log.headPosition();
        await log.append(`${prefix}a`, newEvents(3, 'alpha.created'), NO_STREAM);
        await log.append(`${prefix}b`, newEvents(2, 'beta.created'), NO_STREAM);
        await log.append(`${prefix}a`, newEvents(2, 'alpha.created'), 2n);
        // What both reads must agree on; an engine may give more than a projection reads (EventStoreDB gives the whole event).
        const folded = ({ type, streamId, revision, position, data, metadata }: ProjectionEvent) => ({
          type,
          streamId,
          revision,
          position,
          data,
          recordedAt: metadata.recordedAt,
        });
        const hashed = ({ streamId, revision, position, metadata }: HashedEvent) => ({
          streamId,
          revision,
          position,
          hash: metadata.hash,
        });
        for (const filter of [
          { streamPrefixes: [prefix] },
          { streamPrefixes: [prefix], eventTypePrefixes: ['alpha.'] },
        ]) {
          let from = start;
          for (;;) {
            const options = { fromPosition: from, maxCount: 2, filter };
            const [full, projected, hashes] = await Promise.all([
              log.readAll(options),
              log.readAllForProjections(options),
              log.readAllHashes(options),
            ]);
            expect(projected.events.map(folded)).toEqual(full.events.map(folded));
            expect(projected.events.every((event) => typeof event.metadata.recordedAt === 'string')).toBe(true);
            expect([projected.checkpoint, projected.caughtUp]).toEqual([full.checkpoint, full.caughtUp]);
            expect(hashes.events.map(hashed)).toEqual(full.events.map(hashed));
            expect(hashes.events.every((event) => /^[0-9a-f]{64}$/.test(event.metadata.hash))).toBe(true);
            expect([hashes.checkpoint, hashes.caughtUp]).toEqual([full.checkpoint, full.caughtUp]);
            from = full.checkpoint;
            if (full.caughtUp) break;
          }
        }
        const all = await log.readAllForProjections({ fromPosition: start, filter: { streamPrefixes: [prefix] } });
        expect(all.events.map((event) => [event.streamId, event.revision])).toEqual([
          [`${prefix}a`, 0n],
          [`${prefix}a`, 1n],
          [`${prefix}a`, 2n],
          [`${prefix}b`, 0n],
          [`${prefix}b`, 1n],
          [`${prefix}a`, 3n],
          [`${prefix}a`, 4n],
        ]);
      });

      it('a subscription filtered by type delivers only matching events', async () => {
        const prefix = uniquePrefix('sf');
        const from = await log.headPosition();
        const subscription = log.subscribeToAll({
          fromPosition: from,
          filter: { eventTypePrefixes: [`${prefix}keep.`] },
        });
        const collecting = collectUntil(subscription, ({ events }) => events.length >= 3, timeout);
        await log.append(
          `${prefix}s`,
          [...newEvents(2, `${prefix}keep.a`), ...newEvents(2, `${prefix}drop.a`), ...newEvents(1, `${prefix}keep.b`)],
          NO_STREAM,
        );
        const { events } = await collecting;
        expect(events.map((event) => event.type)).toEqual([`${prefix}keep.a`, `${prefix}keep.a`, `${prefix}keep.b`]);
      });
    });

    /**
     * What a subscriber from `from` hears of `count` events that `append` stores once it is live (on
     * its first batch), checked equal, field for field, to what a read of the log gives.
     */
    async function heardAsRead(
      from: bigint,
      filter: EventFilter,
      count: number,
      append: () => Promise<unknown>,
    ): Promise<RecordedEvent[]> {
      let appending: Promise<unknown> | undefined;
      const { events } = await collectUntil(
        log.subscribeToAll({ fromPosition: from, filter }),
        (collected) => {
          appending ??= append();
          return collected.events.length >= count;
        },
        timeout,
      );
      await appending;
      const read = await log.readAll({ fromPosition: from, filter, maxCount: count + 10 });
      expect(read.events).toHaveLength(count);
      expect(events).toStrictEqual(read.events);
      return events;
    }

    describe('subscriptions', () => {
      it('resumes from a checkpoint with nothing missed or repeated', async () => {
        const prefix = uniquePrefix('r');
        const from = await log.headPosition();
        await log.append(`${prefix}a`, newEvents(40), NO_STREAM);
        const filter = { streamPrefixes: [prefix] };
        const firstPart = await collectUntil(
          log.subscribeToAll({ fromPosition: from, filter }),
          ({ events }) => events.length > 0,
          timeout,
        );
        await log.append(`${prefix}a`, newEvents(10), ANY);
        const seen = firstPart.events.length;
        const secondPart = await collectUntil(
          log.subscribeToAll({ fromPosition: firstPart.checkpoint, filter }),
          ({ events }) => seen + events.length >= 50,
          timeout,
        );
        const all = [...firstPart.events, ...secondPart.events];
        expect(all.map((event) => event.revision)).toEqual(Array.from({ length: 50 }, (_, index) => BigInt(index)));
      });

      it('ends cleanly when the consumer stops or closes it', async () => {
        const prefix = uniquePrefix('c');
        const subscription = log.subscribeToAll({
          fromPosition: await log.headPosition(),
          filter: { streamPrefixes: [prefix] },
        });
        const iteration = (async () => {
          const batches: unknown[] = [];
          for await (const batch of subscription) batches.push(batch);
          return batches.length;
        })();
        await subscription.close();
        await expect(iteration).resolves.toBeGreaterThanOrEqual(0);
        // A broken-out-of loop releases the subscription too.
        const other = log.subscribeToAll({ fromPosition: await log.headPosition() });
        for await (const batch of other) {
          expect(batch.caughtUp).toBe(true);
          break;
        }
      });

      it('a subscriber on the instance that appends gets each event exactly as a read of the log gives it', async () => {
        const prefix = uniquePrefix('f');
        const filter = { streamPrefixes: [prefix] };
        const from = await log.headPosition();
        const data = {
          zebra: 1,
          apple: { nested: [1, 'two', null, { dropped: undefined, half: 1.5 }], empty: {} },
          dropped: undefined,
          text: 'é 😀 "quoted" \\ slash',
          big: 1e21,
          small: 5e-7,
          negativeZero: -0,
          ['__proto__']: { kept: 'as a member' },
          // Past LARGE_TEXT: the appending instance copies such data rather than parse the text it stored.
          long: 'é 😀 "quoted" \\ slash\n'.repeat(3_000),
        };
        const append = () =>
          Promise.all([
            log.append(
              `${prefix}a`,
              [
                {
                  id: randomUUID(),
                  type: 'test.fidelity',
                  data,
                  correlationId: 'correlation',
                  causationId: 'cause',
                  actor: 'someone',
                  tenant: 'tenant-f',
                },
              ],
              NO_STREAM,
            ),
            log.appendMany([
              { streamId: `${prefix}b`, events: newEvents(2), expectedRevision: NO_STREAM },
              { streamId: `${prefix}c`, events: newEvents(1, 'test.other', () => []), expectedRevision: NO_STREAM },
            ]),
          ]);
        const events = await heardAsRead(from, filter, 4, append);
        expect(events.find((event) => event.type === 'test.fidelity')!.data).toStrictEqual(
          JSON.parse(JSON.stringify(data)),
        );
      });

      it('a subscriber on an appending instance, another instance appending between its commits: every event once, in order', async () => {
        const prefix = uniquePrefix('i');
        const filter = { streamPrefixes: [prefix] };
        const other = await subject.connect();
        extra.push(other);
        const from = await log.headPosition();
        const append = () =>
          Promise.all(
            [log, other].map(async (writer, index) => {
              for (let round = 0; round < 100; round += 1) await writer.append(`${prefix}${index}`, newEvents(2), ANY);
            }),
          );
        await heardAsRead(from, filter, 400, append);
      });

      it('16 concurrent writers × 1,000 events: an early and a midway subscriber each get every event once, in position order', async () => {
        const prefix = uniquePrefix('w');
        const writers = await Promise.all(Array.from({ length: 16 }, () => subject.connect()));
        extra.push(...writers);
        const filter = { streamPrefixes: [prefix] };
        const total = 16 * 1_000;
        // The subscribers wait for 16,000 appends, half of them one event each: bound them by the test, not by one delivery.
        const bound = Math.max(timeout, 100_000);

        const from = await log.headPosition();
        let midwayCheckpoint: bigint | undefined;
        let midway: Promise<{ events: RecordedEvent[] }> | undefined;
        const early = collectUntil(
          log.subscribeToAll({ fromPosition: from, filter }),
          ({ events, checkpoint }) => {
            if (!midway && events.length >= total / 4) {
              midwayCheckpoint = checkpoint;
              const remaining = total - events.length;
              midway = collectUntil(
                log.subscribeToAll({ fromPosition: checkpoint, filter }),
                (collected) => collected.events.length >= remaining,
                bound,
              );
              midway.catch(() => undefined);
            }
            return events.length >= total;
          },
          bound,
        );
        // Both are awaited after the writers: a writer that fails first is the failure reported, not a subscription
        // ended by the log's close after it (unawaited, that rejection took the worker down and hid the writer's error).
        early.catch(() => undefined);

        const appended = await Promise.all(
          writers.map(async (writer, index) => {
            let expected: ExpectedRevision = NO_STREAM;
            const ids: string[] = [];
            for (let round = 0; round < 100; round += 1) {
              // Alternate single appends and small batches so group commits mix both.
              const batch = newEvents(10, 'test.concurrent', (offset) => ({ writer: index, n: round * 10 + offset }));
              if (round % 2 === 0) {
                for (const event of batch)
                  expected = (await writer.append(`${prefix}${index}`, [event], expected)).nextExpectedRevision;
              } else {
                expected = (await writer.append(`${prefix}${index}`, batch, expected)).nextExpectedRevision;
              }
              ids.push(...batch.map((event) => event.id));
            }
            return ids;
          }),
        );
        const expectedIds = new Set(appended.flat());

        const earlyEvents = (await early).events;
        expect(earlyEvents).toHaveLength(total);
        expect(new Set(earlyEvents.map((event) => event.id))).toEqual(expectedIds);
        expect(isStrictlyIncreasing(positions(earlyEvents))).toBe(true);

        expect(midway).toBeDefined();
        const midwayEvents = (await midway!).events;
        const expectedMidway = earlyEvents.filter((event) => event.position > midwayCheckpoint!);
        expect(midwayEvents.map((event) => event.id)).toEqual(expectedMidway.map((event) => event.id));
        expect(isStrictlyIncreasing(positions(midwayEvents))).toBe(true);

        for (let index = 0; index < 16; index += 1) {
          const stream = await log.readStream(`${prefix}${index}`);
          expect(stream.map((event) => event.revision)).toEqual(
            Array.from({ length: 1_000 }, (_, revision) => BigInt(revision)),
          );
          expect(stream.map((event) => (event.data as { n: number }).n)).toEqual(
            Array.from({ length: 1_000 }, (_, n) => n),
          );
        }
      }, 120_000);
    });
  });
}

/** What an append of `sent` answers when the stream holds all of it already, its latest event as `stored` answered. */
function allDuplicates(sent: readonly NewEvent[], stored: AppendResult): AppendResult {
  return {
    nextExpectedRevision: stored.nextExpectedRevision,
    position: stored.position,
    appended: 0,
    duplicates: sent.map((event) => event.id),
    events: [],
  };
}

/** Each event of a stream read from its start links to the one before and hashes to what is stored. */
function expectChainHolds(stored: readonly RecordedEvent[]): void {
  let prevHash = GENESIS_HASH;
  for (const event of stored) {
    expect(event.metadata.prevHash).toBe(prevHash);
    const { recordedAt, schemaVersion, correlationId, causationId, actor, tenant, hash } = event.metadata;
    const metadata = { recordedAt, schemaVersion, correlationId, causationId, actor, tenant };
    const { streamId, revision, id, type, data } = event;
    expect(chainHash(prevHash, { streamId, revision, id, type, data, ...metadata })).toBe(hash);
    prevHash = hash;
  }
}
