import esdb from '@eventstore/db-client';
import { jsonBytes, readBack } from '#core';
import {
  appendResult,
  EMPTY_STREAM,
  matchesFilter,
  planAppend,
  prepareAppends,
  prepareNewEvents,
  type KnownEvent,
  type PreparedEvent,
  type SealedEvent,
  type StreamHead,
} from '../append-plan.js';
import { BatchingQueue } from '../batching-queue.js';
import { withTimeout } from '../with-timeout.js';
import { ConnectionStringError, EventLogClosedError, WrongExpectedRevisionError } from '../errors.js';
import { DEFAULT_READ_PAGE_BYTES, pageLimit, positiveInteger } from '../read-limits.js';
import {
  NO_STREAM,
  type AppendResult,
  type EventLog,
  type EventLogHealth,
  type ExpectedRevision,
  type NewEvent,
  type ReadAllOptions,
  type ReadAllResult,
  type ReadStreamOptions,
  type RecordedEvent,
  type SubscribeOptions,
  type Subscription,
} from '../event-log.js';
import {
  isConnectionLoss,
  isErrorType,
  isServerFailure,
  isSystem,
  toldServerFailure,
  toRecordedEvent,
} from './eventstoredb-records.js';
import { withoutPassword } from './connection-string-options.js';
import { EventStoreSubscription } from './eventstoredb-subscription.js';

const { EventStoreDBClient, jsonEvent, ErrorType, START, END, FORWARDS, BACKWARDS } = esdb;

export interface EventStoreDbEventLogOptions {
  /** e.g. `esdb://localhost:2113?tls=false`. */
  readonly connectionString: string;
  /** Streams whose head and event ids stay cached for planning appends. */
  readonly maxCachedStreams?: number;
  /** Attempts for one append when the connection drops; retries resend the same event ids. */
  readonly appendAttempts?: number;
  readonly retryDelayMs?: number;
  /**
   * A read that heard nothing from the server for this long, or an append it did not answer within it, fails as
   * `lost` (30 s by default). The client bounds no connection setup and no BatchAppend answer: a server that takes
   * the connection and says nothing would hold a request, and every append to its stream behind it, for ever. Reads
   * are bounded by silence, not in whole: a long stream read at the server's pace is not cut.
   */
  readonly answerTimeoutMs?: number;
  readonly readPageSize?: number;
  /** A page of `readAll` also stops once its events' data reaches this many bytes (at least one event). 8 MiB by default. */
  readonly readPageBytes?: number;
  readonly clock?: () => Date;
  readonly onError?: (error: Error) => void;
}

interface PendingAppend {
  readonly events: readonly PreparedEvent[];
  readonly expected: ExpectedRevision;
}

/** What this process knows of a stream: enough to plan appends (duplicates, revisions, the chain) without reading it again. */
interface StreamCache {
  head: StreamHead;
  readonly known: Map<string, KnownEvent>;
}

/**
 * The event-log port on EventStoreDB. Our metadata (hash chain, tenant, actor, …) travels in each
 * event's custom metadata; positions are `$all` commit positions.
 *
 * Appends to one stream queue in the process and go as one `appendToStream` per group, planned
 * by the shared `planAppend` against a cached stream head and sent with that head as the
 * expected revision: the server's check catches writers in other processes, after which the
 * cache is refreshed and the group planned again. The server also answers success to ids another
 * process stored since, as an idempotent retry; the write's read-back tells (decision 0004). A
 * dropped connection is retried with the same event ids, which the server treats as an idempotent retry.
 */
export function createEventStoreDbEventLog(options: EventStoreDbEventLogOptions): EventLog {
  const readPageSize = positiveInteger('readPageSize', options.readPageSize ?? 1_000);
  const readPageBytes = positiveInteger('readPageBytes', options.readPageBytes ?? DEFAULT_READ_PAGE_BYTES);
  const client = clientFor(options.connectionString);
  const clock = options.clock ?? (() => new Date());
  const maxCachedStreams = options.maxCachedStreams ?? 10_000;
  const appendAttempts = options.appendAttempts ?? 10;
  const retryDelayMs = options.retryDelayMs ?? 200;
  const answerTimeoutMs = positiveInteger('answerTimeoutMs', options.answerTimeoutMs ?? 30_000);
  const cache = new Map<string, StreamCache>();
  const writers = new Map<string, BatchingQueue<PendingAppend, AppendResult>>();
  const subscriptions = new Set<Subscription>();
  let closed = false;

  async function readStream(streamId: string, readOptions: ReadStreamOptions = {}): Promise<readonly RecordedEvent[]> {
    const backwards = readOptions.direction === 'backwards';
    try {
      const events: RecordedEvent[] = [];
      const stream = client.readStream(streamId, {
        direction: backwards ? BACKWARDS : FORWARDS,
        fromRevision: readOptions.fromRevision ?? (backwards ? END : START),
        maxCount: readOptions.maxCount ?? Number.MAX_SAFE_INTEGER,
      });
      await readEach(stream, answerTimeoutMs, (resolved) => events.push(toRecordedEvent(resolved.event!)));
      return events;
    } catch (error) {
      if (isErrorType(error, ErrorType.STREAM_NOT_FOUND)) return [];
      throw error;
    }
  }

  /**
   * The cached view of a stream, read from the server the first time and, with `refresh`, brought
   * up to date after the server said another process wrote to it (optimistic concurrency).
   */
  async function loadStream(streamId: string, refresh: boolean): Promise<StreamCache> {
    const cached = cache.get(streamId);
    const entry: StreamCache = cached ?? { head: EMPTY_STREAM, known: new Map() };
    if (!cached || refresh) {
      const from = entry.head.revision === NO_STREAM ? 0n : entry.head.revision + 1n;
      for (const event of await readStream(streamId, { fromRevision: from })) {
        entry.known.set(event.id, { revision: event.revision, position: event.position });
        entry.head = { revision: event.revision, lastHash: event.metadata.hash };
      }
    }
    cache.delete(streamId);
    cache.set(streamId, entry);
    for (const [oldest] of cache) {
      if (cache.size <= maxCachedStreams) break;
      if (writers.get(oldest)?.idle !== false) cache.delete(oldest);
    }
    return entry;
  }

  async function appendGroup(streamId: string, group: readonly PendingAppend[]): Promise<(AppendResult | Error)[]> {
    for (let attempt = 1; ; attempt += 1) {
      const entry = await withRetry(() => loadStream(streamId, attempt > 1));
      // The group's own events over what the stream holds, not a copy of it: a copy costs the stream's length.
      const planned = new Map<string, KnownEvent>();
      const known = { get: (id: string) => planned.get(id) ?? entry.known.get(id) };
      let head = entry.head;
      const recordedAt = clock();
      const sealed: SealedEvent[] = [];
      const sealedJson: string[] = [];
      const plans = group.map((pending) => {
        const plan = planAppend(streamId, head, known, pending.events, pending.expected, recordedAt);
        if (plan.kind === 'write') {
          sealed.push(...plan.events);
          sealedJson.push(...plan.dataJson);
          for (const event of plan.events) planned.set(event.id, { revision: event.revision, position: -1n });
          head = plan.head;
        }
        return { plan, headAfter: head, expected: pending.expected };
      });
      // A conflict found on the cache may be the cache's (another process wrote since): read the stream before answering it.
      if (attempt === 1 && plans.some(({ plan }) => plan.kind === 'conflict')) continue;
      // Beaten by another writer on every plan: this last plan only answers, from the stream as it now is.
      const beaten = attempt > MAX_WRITES;
      if (sealed.length > 0 && !beaten) {
        try {
          // If the connection drops, the very same ids are sent again, which the server accepts
          // as an idempotent retry if the first attempt landed.
          // The data as the text its hash covers (the client serializes what it is given when it sends).
          const proposed = sealed.map((event, index) =>
            jsonEvent({
              id: event.id,
              type: event.type,
              data: readBack(event.data, sealedJson[index]) as never,
              metadata: event.metadata as never,
            }),
          );
          const expectedRevision = entry.head.revision === NO_STREAM ? 'no_stream' : entry.head.revision;
          // Bounded in whole: the client's BatchAppend call has no deadline, and a group never answered would hold the
          // appends queued behind it on this stream.
          await withRetry(() =>
            withTimeout(
              client.appendToStream(streamId, proposed, { expectedRevision }),
              answerTimeoutMs,
              () => new ServerSilentError(answerTimeoutMs),
            ),
          );
          if (!(await learnWritten(streamId, entry, sealed))) throw new StoredByAnotherWriterError(streamId);
        } catch (error) {
          // Another process wrote to the stream: refresh from the server and plan again.
          const stale =
            isErrorType(error, ErrorType.WRONG_EXPECTED_VERSION) || error instanceof StoredByAnotherWriterError;
          if (stale) continue;
          throw error;
        }
        entry.head = head;
      }
      const positionOf = (id: string) => entry.known.get(id)!.position;
      const unstored = (id: string) => !entry.known.has(id);
      return plans.map(({ plan, headAfter, expected }) => {
        // Beaten: what the stream does not hold yet gets the port's conflict, which callers retry with the same ids.
        if (beaten && (plan.kind === 'write' || (plan.kind === 'duplicates_only' && plan.duplicates.some(unstored))))
          return new WrongExpectedRevisionError(streamId, expected, entry.head.revision);
        const result = appendResult(plan, headAfter.revision, (event) => positionOf(event.id));
        // Duplicates of events this group wrote were planned before the server placed them: their latest position now.
        if (plan.kind !== 'duplicates_only' || result instanceof Error) return result;
        return { ...result, position: plan.duplicates.map(positionOf).reduce((a, b) => (b > a ? b : a)) };
      });
    }
  }

  /**
   * What the write stored, read back. The server's append result names the position of its last event only; the
   * others sit at transaction-log offsets that depend on each record's encoded size and on chunk boundaries, which
   * the client cannot compute (decision 0025). And the server takes ids that already follow the expected revision as
   * an idempotent retry and answers success: another process may have stored these ids since this one last read the
   * stream, with its own hashes. Learns the positions and answers true only if the stored events are the ones sent.
   */
  async function learnWritten(streamId: string, entry: StreamCache, sealed: readonly SealedEvent[]): Promise<boolean> {
    const written = await withRetry(() =>
      readStream(streamId, { fromRevision: sealed[0].revision, maxCount: sealed.length }),
    );
    const asSent = (event: RecordedEvent, index: number) => event.metadata.hash === sealed[index].metadata.hash;
    if (written.length !== sealed.length || !written.every(asSent)) return false;
    for (const event of written) entry.known.set(event.id, { revision: event.revision, position: event.position });
    return true;
  }

  /** Retries an operation while the server is unreachable, up to `appendAttempts` times. */
  async function withRetry<T>(operation: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt += 1) {
      try {
        return await operation();
      } catch (error) {
        if (!isConnectionLoss(error) || attempt >= appendAttempts) throw error;
        options.onError?.(error as Error);
        await new Promise((resolve) => setTimeout(resolve, retryDelayMs));
      }
    }
  }

  /** The mean data size of the events `readAll` kept, which sizes what it asks the server for. */
  let meanEventBytes = 0;

  async function readAll(readOptions: ReadAllOptions = {}): Promise<ReadAllResult> {
    const limit = pageLimit(readOptions.maxCount, readPageSize);
    const events: RecordedEvent[] = [];
    let bytes = 0;
    let checkpoint = readOptions.fromPosition ?? 0n;
    let fromStart = readOptions.fromPosition === undefined || readOptions.fromPosition === 0n;
    // $all has no server-side filter on reads (only on subscriptions): scan pages and filter here.
    // Reading forwards from a position includes the event there, which is skipped. Each server page
    // streams through event by event, and what follows a full page is let pass, not kept (cancelling
    // the call mid-page made grpc-js close the connection's other calls): a page holds no more than
    // the bound and one event, whatever the server sends. So each request asks for what the page has
    // room for, by count and by the mean size kept, times the events this read went through for each
    // it kept (a filter passes over the rest), and for at least twice the last ask when that fell short.
    let asked = 0;
    let passed = 0;
    for (;;) {
      const room = Math.min(limit - events.length, Math.ceil((readPageBytes - bytes) / (meanEventBytes || 1)));
      const perKept = Math.max(1, passed / Math.max(events.length, 1));
      asked = Math.min(readPageSize, Math.max(Math.ceil(room * perKept), asked * 2)) + (fromStart ? 0 : 1);
      let read = 0;
      let full = false;
      const page = client.readAll({
        fromPosition: fromStart ? START : { commit: checkpoint, prepare: checkpoint },
        maxCount: asked,
      });
      await readEach(page, answerTimeoutMs, (resolved) => {
        read += 1;
        if (full) return;
        const record = resolved.event!;
        const position = record.position.commit;
        if (!fromStart && position <= checkpoint) return;
        fromStart = false;
        checkpoint = position;
        passed += 1;
        if (isSystem(record) || !matchesFilter(record, readOptions.filter)) return;
        events.push(toRecordedEvent(record));
        const eventBytes = jsonBytes(record.data);
        bytes += eventBytes;
        meanEventBytes += (eventBytes - meanEventBytes) / (meanEventBytes ? 16 : 1);
        full = events.length === limit || bytes >= readPageBytes;
      });
      if (full) return { events, checkpoint, caughtUp: false };
      if (read < asked) return { events, checkpoint, caughtUp: true };
    }
  }

  async function headPosition(): Promise<bigint> {
    let head = 0n;
    const last = client.readAll({ fromPosition: END, direction: BACKWARDS, maxCount: 1 });
    await readEach(last, answerTimeoutMs, (resolved) => (head = resolved.event?.position?.commit ?? head));
    return head;
  }

  async function appendPrepared(streamId: string, events: readonly PreparedEvent[], expected: ExpectedRevision) {
    // Once closing, a stream without a writer would get one of its own and be sent after `close` returned.
    if (closed) throw new EventLogClosedError();
    let writer = writers.get(streamId);
    if (!writer) {
      // A group the server refuses (over its maximum append size, …) is retried in halves; an
      // outage that outlasted the retries, or a deadline the server did not meet, fails the group whole.
      writer = new BatchingQueue((group) => appendGroup(streamId, group), {
        splitOnFailure: (error) => !isServerFailure(error),
      });
      writers.set(streamId, writer);
    }
    return await writer.push({ events, expected }).finally(() => {
      if (writer.idle) writers.delete(streamId);
    });
  }

  /** The operation, its failures on the server marked as such (the API answers 503). */
  const failingAsTheServer =
    <Args extends unknown[], Result>(operation: (...args: Args) => Promise<Result>) =>
    (...args: Args): Promise<Result> =>
      operation(...args).catch((error: unknown) => {
        throw toldServerFailure(error, { closing: closed });
      });

  const readAllTold = failingAsTheServer(readAll);
  const headPositionTold = failingAsTheServer(headPosition);

  return {
    append: failingAsTheServer(async (streamId: string, events: readonly NewEvent[], expected: ExpectedRevision) =>
      appendPrepared(streamId, prepareNewEvents(streamId, events), expected),
    ),
    /**
     * No multi-stream transactions here: every part is checked first, then the parts go one after
     * the other in the order given, each atomic; a failure stops there (see the port).
     */
    appendMany: failingAsTheServer(async (appends: Parameters<EventLog['appendMany']>[0]) => {
      const results: AppendResult[] = [];
      for (const { streamId, events, expectedRevision } of prepareAppends(appends))
        results.push(await appendPrepared(streamId, events, expectedRevision));
      return results;
    }),
    appendsManyAtomically: false,
    readStream: failingAsTheServer(readStream),
    readAll: readAllTold,
    // Each event's hashes travel inside its stored metadata: there is nothing to leave out.
    readAllForProjections: readAllTold,
    readAllHashes: readAllTold,
    headPosition: headPositionTold,
    health: failingAsTheServer(async (): Promise<EventLogHealth> => ({
      engine: 'eventstoredb',
      headPosition: await headPosition(),
    })),
    subscribeToAll(subscribeOptions: SubscribeOptions = {}): Subscription {
      const subscription = new EventStoreSubscription(client, subscribeOptions, {
        retryDelayMs,
        idleProbeMs: answerTimeoutMs,
        probe: headPositionTold,
        onError: options.onError,
      });
      subscriptions.add(subscription);
      return subscription;
    },
    async close() {
      closed = true;
      // Appends under way get their answer time to finish; past it, those still waiting are refused, not sent.
      const drained = Promise.all([...writers.values()].map((writer) => writer.close()));
      await withTimeout(drained, answerTimeoutMs, () => new ServerSilentError(answerTimeoutMs)).catch(() => {
        for (const writer of writers.values()) writer.abandon(new EventLogClosedError());
      });
      await Promise.all([...subscriptions].map((subscription) => subscription.close()));
      await client.dispose();
    },
  };
}

/**
 * The client for `connectionString`. One it cannot use fails with what is wrong, never with the client's own error,
 * which carries the whole string (a command line printing it printed the password).
 */
function clientFor(connectionString: string): InstanceType<typeof EventStoreDBClient> {
  try {
    return EventStoreDBClient.connectionString(connectionString);
  } catch (error) {
    const { location, expected, message } = error as { location?: unknown; expected?: unknown; message?: unknown };
    // Its parse error's message quotes the string: only where it stopped is told.
    const problem =
      Array.isArray(location) && typeof expected === 'string'
        ? `cannot be read: ${expected} expected at character ${String(location[0])}`
        : `is refused by the client: ${withoutPassword(String(message), connectionString)}`;
    throw new ConnectionStringError(problem);
  }
}

/** Writes of one append group, each planned on the stream as read after the last was beaten by another writer. */
const MAX_WRITES = 5;

/**
 * Hands each event of a client read stream to `take`, to the stream's end; fails as unanswered (`ServerSilentError`)
 * once nothing came for `silenceMs`, however long the whole read takes. Leaving a `for await` early leaves the
 * underlying gRPC stream unpiped with its end unread, and `client.dispose()` then waits for it forever: the loop
 * reads on, told nothing more, after a silence failed the read.
 */
async function readEach<Resolved>(
  stream: AsyncIterable<Resolved>,
  silenceMs: number,
  take: (resolved: Resolved) => void,
): Promise<void> {
  let heard = Date.now();
  let silent = false;
  let timer: NodeJS.Timeout | undefined;
  const silence = new Promise<never>((_, reject) => {
    const listen = () => {
      const quietMs = Date.now() - heard;
      if (quietMs < silenceMs) timer = setTimeout(listen, silenceMs - quietMs);
      else {
        silent = true;
        reject(new ServerSilentError(silenceMs));
      }
    };
    timer = setTimeout(listen, silenceMs);
  });
  const reading = (async () => {
    for await (const resolved of stream) {
      heard = Date.now();
      if (!silent) take(resolved);
    }
  })();
  try {
    await Promise.race([reading, silence]);
  } finally {
    clearTimeout(timer);
  }
}

/** EventStoreDB did not answer an operation in time; what it does with it later is unknown. */
class ServerSilentError extends Error {
  readonly type = ErrorType.DEADLINE_EXCEEDED;

  constructor(timeoutMs: number) {
    super(`EventStoreDB did not answer within ${timeoutMs} ms`);
  }
}

/** The server answered an append as an idempotent retry of events another process stored under the same ids. */
class StoredByAnotherWriterError extends Error {
  constructor(streamId: string) {
    super(`another writer stored the events sent to ${streamId} under the same ids`);
  }
}
