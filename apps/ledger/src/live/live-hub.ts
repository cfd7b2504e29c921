import {
  foldFootprint,
  initialSessionState,
  SESSION_STREAM_PREFIX,
  sessionChanges,
  sessionStreamId,
  type SessionState,
} from '#core';
import type { SessionRef } from '../sessions/session-repository.js';
import type { EventLog, RecordedEvent, Subscription } from '#event-log';
import { RetryLater } from '../http/api-error.js';
import { defaultLiveFoldBytes } from '../sessions/fold-cache.js';
import { foldSessionEvents } from '../sessions/session-fold.js';
import { sessionItems, type LiveItem } from './live-items.js';

/** Where live items go: one client's stream. */
export interface LiveSink {
  /** The session as the client joins it: sent at once. */
  start(items: readonly LiveItem[]): void;
  push(items: readonly LiveItem[]): void;
  /** Cut off, with where to resume: its session outgrew what the hub may follow. */
  close(reason: 'live_feeds_full' | 'live_feed_failed'): void;
}

interface WatchedSession {
  readonly tenant: string;
  state: SessionState;
  /** What `state` holds in memory, by `foldFootprint`'s estimate. */
  footprint: number;
  readonly sinks: Set<LiveSink>;
}

const RETRY_DELAY_MS = 500;
/** A tenant's folds may hold at most this share of the hub's bytes: one tenant cannot take every other's feeds. */
const TENANT_SHARE = 1 / 4;
/** How long a new watcher waits for the hub to reach the session's newest event (a session just opened). */
const JOIN_WAIT_MS = 5_000;

/**
 * The live feed of one service instance. It follows the log (not the in-process bus), so every
 * instance sees every append, whoever made it. Sessions that have watchers are folded with the
 * same reducer as the read models, and each event's changes go to their watchers as items
 * tagged with the event's position.
 *
 * A watcher joins at an exact position: it gets the difference between the session as of the
 * position it already has (`from`; nothing = a full snapshot) and the session as of the hub's
 * position, then every later change — nothing missed, nothing repeated. Joining and applying a
 * batch are serialized, so no event falls between the two.
 *
 * Delivery: ordered, at least once per change in state (coalescing may merge intermediate
 * states); after a log read error the hub resubscribes from the last position it applied.
 *
 * The folds it follows hold at most `maxBytes` of memory between them, and a tenant's at most a quarter of that, by
 * `foldFootprint`'s estimate: a watcher of one more session past either is refused (`503 live_feeds_full`), and a
 * session that grows past either has its watchers cut off with where to resume (decision 0068). A session already
 * followed is joined as it is.
 */
export class LiveHub {
  private position = 0n;
  private readonly watched = new Map<string, WatchedSession>();
  private serial: Promise<unknown> = Promise.resolve();
  private subscription: Subscription | undefined;
  private loop: Promise<void> | undefined;
  private stopped = false;
  private readonly waiters = new Set<() => void>();
  private heldBytes = 0;
  private readonly tenantBytes = new Map<string, number>();

  constructor(
    private readonly eventLog: EventLog,
    /** Hears what went wrong, and what the hub did about it. */
    private readonly onError: (error: Error, what: string) => void = () => {},
    private readonly maxBytes: number = defaultLiveFoldBytes(),
  ) {}

  async start(): Promise<void> {
    this.position = await this.eventLog.headPosition();
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.subscription?.close();
    await this.loop;
  }

  get watchedSessions(): number {
    return this.watched.size;
  }

  /** What the folds of the sessions followed hold in memory, by `foldFootprint`'s estimate. */
  get watchedBytes(): number {
    return this.heldBytes;
  }

  /**
   * Adds a watcher of a session as of `from` (which the hub must have reached: see `reach`),
   * opening its sink only if the session exists, and returns how to remove it.
   */
  async watch(
    session: SessionRef,
    from: bigint | undefined,
    openSink: () => LiveSink,
  ): Promise<{ unwatch: () => void } | undefined> {
    const streamId = sessionStreamId(session.tenant, session.sessionId);
    // Refused before the session is read and measured when there is no room at all: a refusal costs nothing.
    if (!this.watched.has(streamId)) this.refuseUnlessRoom(session.tenant, 0);
    if (from === undefined) {
      // A snapshot of a session already folded here needs no read.
      const joined = await this.serialized(async () => {
        const entry = this.watched.get(streamId);
        return entry ? { watching: this.join(streamId, entry, initialSessionState, openSink) } : undefined;
      });
      if (joined) return joined.watching;
    }
    // Everything up to the hub's position when the read starts is committed, so the read holds it; if the hub moves on meanwhile, read what followed.
    let readAt = this.position;
    let events = await this.eventLog.readStream(streamId);
    const readOn = async () => {
      const last = events.at(-1);
      const more = await this.eventLog.readStream(streamId, { fromRevision: last ? last.revision + 1n : 0n });
      if (more.length > 0) events = events.concat(more);
    };
    // A session opened a moment ago may be in the log before the hub has followed it there: wait, bounded.
    const newest = events.at(-1)?.position;
    if (newest !== undefined && newest > readAt && (await this.reach(newest, JOIN_WAIT_MS))) {
      readAt = this.position;
      await readOn();
    }
    return this.serialized(async () => {
      if (this.position > readAt) await readOn();
      // Fold forward from the client's state, so unchanged messages and blocks stay the same objects and only real changes are sent.
      const base =
        from === undefined
          ? initialSessionState
          : await foldSessionEvents(
              this.eventLog,
              initialSessionState,
              events.filter((event) => event.position <= from),
              'read',
            );
      const current = await foldSessionEvents(
        this.eventLog,
        base,
        events.filter((event) => event.position > (from ?? -1n) && event.position <= this.position),
        'read',
      );
      const entry = this.watched.get(streamId) ?? this.followed(session.tenant, current);
      return this.join(streamId, entry, base, openSink, current);
    });
  }

  /** A session of `tenant` to follow from `state`, if the folds followed leave it room. */
  private followed(tenant: string, state: SessionState): WatchedSession {
    const footprint = foldFootprint(state);
    if (state.status === 'open') this.refuseUnlessRoom(tenant, footprint);
    return { tenant, state, footprint, sinks: new Set() };
  }

  /** What, if anything, following `footprint` more bytes of `tenant`'s would take past: the hub's bytes or its share. */
  private overBudget(tenant: string, footprint: number): string | undefined {
    const tenantLimit = Math.floor(this.maxBytes * TENANT_SHARE);
    const tenantHeld = this.tenantBytes.get(tenant) ?? 0;
    if (tenantHeld + footprint > tenantLimit)
      return `the folds of this tenant's sessions followed here hold ${tenantHeld} bytes; ${footprint} more would pass its share, ${tenantLimit}`;
    if (this.heldBytes + footprint > this.maxBytes)
      return `the folds of the sessions followed here hold ${this.heldBytes} bytes; ${footprint} more would pass ${this.maxBytes}`;
    return undefined;
  }

  private refuseUnlessRoom(tenant: string, footprint: number): void {
    const over = this.overBudget(tenant, footprint);
    if (over !== undefined) throw new RetryLater('live_feeds_full', `${over}: retry later`);
  }

  private hold(entry: WatchedSession, bytes: number): void {
    this.heldBytes += bytes;
    const tenantHeld = (this.tenantBytes.get(entry.tenant) ?? 0) + bytes;
    if (tenantHeld === 0) this.tenantBytes.delete(entry.tenant);
    else this.tenantBytes.set(entry.tenant, tenantHeld);
  }

  /** Stops following a session: its bytes are given back. */
  private forget(streamId: string, entry: WatchedSession): void {
    if (this.watched.get(streamId) !== entry) return;
    this.watched.delete(streamId);
    this.hold(entry, -entry.footprint);
  }

  /** Inside the serialized section: sends the difference from `base` and adds the sink. */
  private join(
    streamId: string,
    entry: WatchedSession,
    base: SessionState,
    openSink: () => LiveSink,
    current = entry.state,
  ): { unwatch: () => void } | undefined {
    if (current.status !== 'open') return undefined;
    const sink = openSink();
    sink.start(sessionItems(sessionChanges(base, current), current.position));
    if (!this.watched.has(streamId)) {
      this.watched.set(streamId, entry);
      this.hold(entry, entry.footprint);
    }
    entry.sinks.add(sink);
    const unwatch = () => {
      entry.sinks.delete(sink);
      if (entry.sinks.size === 0) this.forget(streamId, entry);
    };
    return { unwatch };
  }

  /** Resolves true once the hub has applied everything up to `position`. */
  async reach(position: bigint, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (this.position < position) {
      const left = deadline - Date.now();
      if (left <= 0 || this.stopped) return false;
      await new Promise<void>((resolve) => {
        const wake = () => {
          clearTimeout(timer);
          this.waiters.delete(wake);
          resolve();
        };
        const timer = setTimeout(wake, left);
        this.waiters.add(wake);
      });
    }
    return true;
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      try {
        this.subscription = this.eventLog.subscribeToAll({
          fromPosition: this.position,
          filter: { streamPrefixes: [SESSION_STREAM_PREFIX] },
        });
        for await (const batch of this.subscription) {
          await this.serialized(() => this.apply(batch.events, batch.checkpoint));
          if (this.stopped) break;
        }
      } catch (error) {
        if (this.stopped) break;
        this.onError(error as Error, 'lost the log; resubscribing from its position');
        await new Promise((resolve) => setTimeout(resolve, RETRY_DELAY_MS));
      }
    }
  }

  private async apply(events: readonly RecordedEvent[], checkpoint: bigint): Promise<void> {
    for (const event of events) {
      const entry = this.watched.get(event.streamId);
      if (!entry || event.position <= this.position) continue;
      let next: SessionState;
      let items: LiveItem[];
      let footprint: number;
      try {
        next = await foldSessionEvents(this.eventLog, entry.state, [event], 'read');
        items = sessionItems(sessionChanges(entry.state, next), event.position);
        footprint = foldFootprint(next, { state: entry.state, footprint: entry.footprint });
      } catch (error) {
        // One session's event the hub cannot follow (a failed read of a fork's source, or a defect) must not hold
        // every feed of the instance, as retrying its batch for ever did: its watchers are let go, told where to
        // resume, and the others go on.
        this.onError(error as Error, `could not follow ${event.streamId}; its feeds were let go`);
        this.forget(event.streamId, entry);
        for (const sink of entry.sinks) sink.close('live_feed_failed');
        continue;
      }
      this.hold(entry, footprint - entry.footprint);
      entry.state = next;
      entry.footprint = footprint;
      if (this.overBudget(entry.tenant, 0) !== undefined) {
        // The session that grew past the room is let go, its watchers told where to resume; not the others.
        this.forget(event.streamId, entry);
        for (const sink of entry.sinks) sink.close('live_feeds_full');
        continue;
      }
      for (const sink of entry.sinks) sink.push(items);
    }
    if (checkpoint > this.position) this.position = checkpoint;
    for (const wake of [...this.waiters]) wake();
  }

  private serialized<T>(work: () => Promise<T>): Promise<T> {
    const result = this.serial.then(work);
    this.serial = result.catch(() => undefined);
    return result;
  }
}
