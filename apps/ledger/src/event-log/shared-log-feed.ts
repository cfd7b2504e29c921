import { approximateSize } from '#core';
import {
  matchesFilter,
  partitionPoint,
  type EventLog,
  type RecordedEvent,
  type SubscribeOptions,
  type Subscription,
  type SubscriptionBatch,
} from '#event-log';

/** How many recent events the shared read keeps, so a consumer a little behind it needs no read of its own. */
const WINDOW_EVENTS = 10_000;
/**
 * And how much of their data, roughly (characters of strings, a few bytes for anything else): an
 * event can be as large as a request body, and 10,000 of those would not fit in the heap.
 */
const WINDOW_DATA_SIZE = 32 * 1024 * 1024;
/** At most this many events per batch handed to a consumer from the window. */
const MAX_BATCH_EVENTS = 5_000;
const RETRY_DELAY_MS = 500;

/** What the shared read considered in one go: every event in (after, checkpoint]. */
interface Segment {
  readonly after: bigint;
  readonly checkpoint: bigint;
  readonly events: readonly RecordedEvent[];
  /** The events' data size, as `approximateSize` estimates it. */
  readonly dataSize: number;
}

/**
 * The event log with one read of its tail shared by every subscription in the process: the
 * projections, the governance saga, the Merkle log, the live hub and raw live feeds each used to
 * poll the log on their own, every time it grew. Now one unfiltered subscription follows the head
 * and keeps a window of recent events; each subscription filters that window in memory, and only
 * one that is behind the window (a projection catching up after a restart, a slow raw feed) reads
 * the log itself until it reaches the window. Every consumer still keeps its own checkpoint.
 *
 * Same guarantees as the adapter's subscriptions: ordered, gap-free, each matching event once per
 * iteration (the window is a contiguous run of what the shared read considered, and the shared
 * read resumes from where it stopped after an error).
 */
export function withSharedLogFeed(eventLog: EventLog, onError: (error: Error) => void): EventLog {
  const feed = new SharedLogFeed(eventLog, onError);
  return {
    append: (streamId, events, expected) => eventLog.append(streamId, events, expected),
    appendMany: (appends) => eventLog.appendMany(appends),
    appendsManyAtomically: eventLog.appendsManyAtomically,
    readStream: (streamId, options) => eventLog.readStream(streamId, options),
    readAll: (options) => eventLog.readAll(options),
    readAllForProjections: (options) => eventLog.readAllForProjections(options),
    readAllHashes: (options) => eventLog.readAllHashes(options),
    headPosition: () => eventLog.headPosition(),
    health: () => eventLog.health(),
    subscribeToAll: (options) => feed.subscribe(options),
    async close() {
      await feed.close();
      await eventLog.close();
    },
  };
}

class SharedLogFeed {
  private segments: Segment[] = [];
  private windowEvents = 0;
  private windowDataSize = 0;
  /** Everything up to here has been considered by the shared read. */
  private reached = 0n;
  private started: Promise<void> | undefined;
  private upstream: Subscription | undefined;
  private loop: Promise<void> | undefined;
  private closed = false;
  private readonly waiters = new Set<() => void>();

  constructor(
    private readonly eventLog: EventLog,
    private readonly onError: (error: Error) => void,
  ) {}

  subscribe(options: SubscribeOptions = {}): Subscription {
    // A failed start (the database down) is tried again by the next subscription.
    this.started ??= this.start().catch((error: Error) => {
      this.started = undefined;
      throw error;
    });
    const started = this.started;
    const abort = new AbortController();
    const from = options.fromPosition ?? 0n;
    const { filter } = options;
    const next = (checkpoint: bigint) => this.next(checkpoint, filter);
    const waitPast = (checkpoint: bigint) => this.waitPast(checkpoint, abort.signal);
    // A closed feed ends its subscriptions: `waitPast` no longer waits, so looping on would spin for ever.
    const ended = () => abort.signal.aborted || this.closed;
    return {
      async *[Symbol.asyncIterator](): AsyncIterator<SubscriptionBatch> {
        await started;
        let checkpoint = from;
        let announcedCaughtUp = false;
        while (!ended()) {
          const batch = await next(checkpoint);
          if (ended()) return;
          if (batch.events.length > 0 || batch.checkpoint !== checkpoint || (batch.caughtUp && !announcedCaughtUp))
            yield batch;
          announcedCaughtUp ||= batch.caughtUp;
          checkpoint = batch.checkpoint;
          if (batch.caughtUp) await waitPast(checkpoint);
        }
      },
      close: () => {
        abort.abort();
        this.wake();
        return Promise.resolve();
      },
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    this.wake();
    await this.upstream?.close();
    await this.loop;
  }

  private async start(): Promise<void> {
    this.reached = await this.eventLog.headPosition();
    this.loop = this.follow();
  }

  /** What a subscription at `checkpoint` gets next: from the window when it covers it, else read from the log. */
  private async next(checkpoint: bigint, filter: SubscribeOptions['filter']): Promise<SubscriptionBatch> {
    const windowStart = this.segments[0]?.after ?? this.reached;
    if (checkpoint < windowStart) return this.eventLog.readAll({ fromPosition: checkpoint, filter });
    if (checkpoint >= this.reached) return { events: [], checkpoint, caughtUp: true };
    const events: RecordedEvent[] = [];
    // Small commits make many segments (thousands in a full window): find the first one past the
    // checkpoint by bisection, not by walking every segment on every subscriber's every batch.
    const first = partitionPoint(this.segments, (segment) => segment.checkpoint <= checkpoint);
    for (let index = first; index < this.segments.length; index += 1) {
      for (const event of this.segments[index].events) {
        if (event.position <= checkpoint || !matchesFilter(event, filter)) continue;
        events.push(event);
        if (events.length === MAX_BATCH_EVENTS) return { events, checkpoint: event.position, caughtUp: false };
      }
    }
    return { events, checkpoint: this.reached, caughtUp: true };
  }

  /** Resolves once the shared read has gone past `checkpoint`, or the subscription or the feed closes. */
  private waitPast(checkpoint: bigint, signal: AbortSignal): Promise<void> {
    if (this.reached > checkpoint || signal.aborted || this.closed) return Promise.resolve();
    return new Promise((resolve) => {
      const check = () => {
        if (this.reached <= checkpoint && !signal.aborted && !this.closed) return;
        this.waiters.delete(check);
        resolve();
      };
      this.waiters.add(check);
    });
  }

  private async follow(): Promise<void> {
    while (!this.closed) {
      try {
        this.upstream = this.eventLog.subscribeToAll({ fromPosition: this.reached });
        if (this.closed) await this.upstream.close();
        for await (const batch of this.upstream) {
          if (batch.checkpoint > this.reached) this.append(batch.events, batch.checkpoint);
          if (this.closed) break;
        }
      } catch (error) {
        if (this.closed) break;
        this.onError(error as Error);
        await new Promise((resolve) => setTimeout(resolve, RETRY_DELAY_MS));
      }
    }
  }

  private append(events: readonly RecordedEvent[], checkpoint: bigint): void {
    const last = this.segments.at(-1);
    const size = events.reduce((sum, event) => sum + approximateSize(event.data), 0);
    // A batch of nothing only moves the checkpoint: it extends the last segment rather than adding one.
    if (events.length === 0 && last) this.segments[this.segments.length - 1] = { ...last, checkpoint };
    else this.segments.push({ after: this.reached, checkpoint, events, dataSize: size });
    this.windowEvents += events.length;
    this.windowDataSize += size;
    this.reached = checkpoint;
    while ((this.windowEvents > WINDOW_EVENTS || this.windowDataSize > WINDOW_DATA_SIZE) && this.segments.length > 1) {
      const dropped = this.segments.shift()!;
      this.windowEvents -= dropped.events.length;
      this.windowDataSize -= dropped.dataSize;
    }
    // The consumers take the new events a turn later, so that whoever awaited the commit (an HTTP answer,
    // the saga's next step) goes on first instead of behind every consumer's fold and statement (decision 0055).
    setImmediate(() => this.wake());
  }

  private wake(): void {
    for (const check of [...this.waiters]) check();
  }
}
