/**
 * The event-log port: an append-only log of streams with a global order. Reading and writing
 * are separate interfaces so that projections depend on reading only.
 *
 * Revisions are 0-based per stream (the first event of a stream has revision 0n); positions are
 * global, strictly increasing in commit order, and `fromPosition` is always exclusive.
 */

/** Expected revision of a stream before an append: a revision, or one of three sentinels. */
export type ExpectedRevision = bigint | typeof ANY | typeof NO_STREAM | typeof STREAM_EXISTS;
export const ANY = 'any' as const;
export const NO_STREAM = 'no_stream' as const;
export const STREAM_EXISTS = 'stream_exists' as const;

/** Where a stream stands: its last revision, or `no_stream` when it holds nothing. */
export type StreamState = bigint | typeof NO_STREAM;

/** An event to append. `id` must be a UUID; an id the stream already holds is a duplicate, not a second event. */
export interface NewEvent {
  readonly id: string;
  readonly type: string;
  readonly data: unknown;
  readonly schemaVersion?: number;
  readonly correlationId?: string;
  readonly causationId?: string;
  /** The credential that appended it; `anonymous` until authentication exists. */
  readonly actor?: string;
  readonly tenant?: string;
}

export interface EventMetadata {
  readonly recordedAt: string;
  readonly schemaVersion: number;
  readonly correlationId: string | null;
  readonly causationId: string | null;
  readonly actor: string;
  readonly tenant: string;
  /** SHA-256 chain: `hash = sha256(prevHash, canonical event)`, see `chainHash` in the core. */
  readonly prevHash: string;
  readonly hash: string;
}

export interface RecordedEvent {
  readonly id: string;
  readonly type: string;
  readonly streamId: string;
  readonly revision: bigint;
  readonly position: bigint;
  readonly data: unknown;
  readonly metadata: EventMetadata;
}

/**
 * What a read model folds of an event: where it lies, what it is and when it was recorded. A
 * rebuild reads the whole log, so the log then fetches and sends nothing more: no id, envelope
 * or chain hashes (decision 0048). A `RecordedEvent` is one too.
 */
export interface ProjectionEvent extends Pick<RecordedEvent, 'type' | 'streamId' | 'revision' | 'position' | 'data'> {
  readonly metadata: Pick<EventMetadata, 'recordedAt'>;
}

export interface AppendResult {
  /** The stream's last revision after the append: pass it as the next expected revision. */
  readonly nextExpectedRevision: bigint;
  /** Global position of the batch's last event (for an all-duplicate batch, the latest position among its events). */
  readonly position: bigint;
  /** How many events this call stored. */
  readonly appended: number;
  /** Ids of events the stream already held; they were not stored again. */
  readonly duplicates: readonly string[];
  /** The events this call stored, as the log recorded them (revision, position, metadata), in order: no read-back needed. */
  readonly events: readonly RecordedEvent[];
}

export { DEFAULT_TENANT } from '#core';
export const ANONYMOUS_ACTOR = 'anonymous';

export interface EventFilter {
  /** Keep events whose type starts with one of these (e.g. `chunk.`, `toolcall.`). */
  readonly eventTypePrefixes?: readonly string[];
  /** Keep events whose stream id starts with one of these (e.g. `session-`). */
  readonly streamPrefixes?: readonly string[];
}

export interface ReadStreamOptions {
  readonly fromRevision?: bigint;
  readonly direction?: 'forwards' | 'backwards';
  readonly maxCount?: number;
}

export interface ReadAllOptions {
  /** Exclusive: events after this position. Omitted = from the start. */
  readonly fromPosition?: bigint;
  readonly maxCount?: number;
  readonly filter?: EventFilter;
}

/**
 * What the Merkle log holds of an event: where it lies and its chain hash. The checkpoint signer reads
 * the log again for these alone, to check the leaves it signs (decision 0049). A `RecordedEvent` is one too.
 */
export interface HashedEvent extends Pick<RecordedEvent, 'streamId' | 'revision' | 'position'> {
  readonly metadata: Pick<EventMetadata, 'hash'>;
}

export interface ReadAllResult<Event extends Pick<RecordedEvent, 'position'> = RecordedEvent> {
  readonly events: readonly Event[];
  /** Everything up to here has been considered (filtered-out events included): resume after it. */
  readonly checkpoint: bigint;
  /** True when the read reached the head of the log as it stood when it was read. */
  readonly caughtUp: boolean;
}

export interface SubscribeOptions {
  readonly fromPosition?: bigint;
  readonly filter?: EventFilter;
}

/**
 * What a subscription yields: the events read in one go (possibly none), in position order, and
 * the checkpoint to store once they are handled.
 */
export type SubscriptionBatch = ReadAllResult;

/**
 * A live subscription to the whole log. Iterate it with `for await`; breaking out of the loop
 * or calling `close()` ends it cleanly. Delivery is ordered and gap-free: every committed event
 * matching the filter after `fromPosition` arrives exactly once, in position order.
 */
export interface Subscription extends AsyncIterable<SubscriptionBatch> {
  close(): Promise<void>;
}

export interface EventLogReader {
  /** Events of one stream; a missing stream reads as an empty list. */
  readStream(streamId: string, options?: ReadStreamOptions): Promise<readonly RecordedEvent[]>;
  readAll(options?: ReadAllOptions): Promise<ReadAllResult>;
  /** The same read, of what a read model folds alone: a rebuild reads the whole log, and the log then fetches and sends no more. */
  readAllForProjections(options?: ReadAllOptions): Promise<ReadAllResult<ProjectionEvent>>;
  /** The same read, of each event's place and chain hash alone. */
  readAllHashes(options?: ReadAllOptions): Promise<ReadAllResult<HashedEvent>>;
  subscribeToAll(options?: SubscribeOptions): Subscription;
  /** The position of the last committed event (0n when the log is empty). */
  headPosition(): Promise<bigint>;
}

/** One stream's part of a multi-stream append. */
export interface StreamAppend {
  readonly streamId: string;
  readonly events: readonly NewEvent[];
  readonly expectedRevision: ExpectedRevision;
}

export interface EventLogWriter {
  /**
   * Appends atomically: all of `events` or none. Events whose id the stream already holds are
   * reported as duplicates and not stored; the expected revision is checked only when
   * something new remains, so an exact retry of an acknowledged batch succeeds.
   */
  append(streamId: string, events: readonly NewEvent[], expectedRevision: ExpectedRevision): Promise<AppendResult>;
  /**
   * Appends to several streams, each part under the rules of `append` with its own expected
   * revision; one result per part, in order. PostgreSQL stores all parts or none (one
   * transaction). EventStoreDB has no multi-stream transaction: it appends the parts one after the
   * other, each atomic, and a failure leaves the parts before it stored. So callers put the part
   * that is the truth first and make the later ones derivable from it (decision 0027).
   */
  appendMany(appends: readonly StreamAppend[]): Promise<AppendResult[]>;
  /** Whether `appendMany` stores all parts or none (PostgreSQL), so a caller may put steps that follow each other in one append. */
  readonly appendsManyAtomically: boolean;
}

/** What an operator needs to see: where the log stands, and what could stall its subscribers. */
export interface EventLogHealth {
  readonly engine: 'postgres' | 'eventstoredb';
  readonly headPosition: bigint;
  /** PostgreSQL: how long the transaction holding the append lock has been open (null when free). */
  readonly appendLockHeldMs?: number | null;
  readonly waitingWriters?: number;
  /** PostgreSQL: false when the server refuses writes (a standby, or read-only by setting). */
  readonly takesWrites?: boolean;
}

export interface EventLog extends EventLogReader, EventLogWriter {
  health(): Promise<EventLogHealth>;
  close(): Promise<void>;
}
