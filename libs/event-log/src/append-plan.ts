import { canonicalJson, chainHash, GENESIS_HASH } from '#core';
import { InvalidEventError, WrongExpectedRevisionError } from './errors.js';
import {
  ANONYMOUS_ACTOR,
  ANY,
  DEFAULT_TENANT,
  NO_STREAM,
  STREAM_EXISTS,
  type AppendResult,
  type EventFilter,
  type ExpectedRevision,
  type NewEvent,
  type RecordedEvent,
  type StreamAppend,
  type StreamState,
} from './event-log.js';

/**
 * How an append turns into stored events, shared by every adapter so that revisions, hashes,
 * duplicates and conflicts follow the same rules whatever the engine.
 */

export interface StreamHead {
  readonly revision: StreamState;
  readonly lastHash: string;
}

export const EMPTY_STREAM: StreamHead = { revision: NO_STREAM, lastHash: GENESIS_HASH };

/** An event the stream already holds, found by id. */
export interface KnownEvent {
  readonly revision: bigint;
  readonly position: bigint;
}

/** An event with its revision, metadata and chain hash settled; only its global position is left to the log. */
export type SealedEvent = Omit<RecordedEvent, 'position'>;

export type AppendPlan =
  | {
      readonly kind: 'write';
      readonly events: readonly SealedEvent[];
      /** Each event's data as its canonical JSON, which its hash covers: what the log stores. */
      readonly dataJson: readonly string[];
      readonly duplicates: readonly string[];
      readonly head: StreamHead;
    }
  | { readonly kind: 'duplicates_only'; readonly duplicates: readonly string[]; readonly lastKnown: KnownEvent }
  | { readonly kind: 'conflict'; readonly error: WrongExpectedRevisionError };

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * A new event checked for the log, with its data's canonical JSON made once: the chain hash
 * covers that text and the log stores it, so the data is serialized once per append, and what
 * is stored is what was hashed, as it was when the append was called.
 */
export interface PreparedEvent extends NewEvent {
  readonly dataJson: string;
}

/** One stream's part of an append, its events prepared. */
export interface PreparedAppend extends StreamAppend {
  readonly events: readonly PreparedEvent[];
}

/** Checks an append's events (throws `InvalidEventError` naming the first offending field) and prepares them; before queueing. */
export function prepareNewEvents(streamId: string, events: readonly NewEvent[]): PreparedEvent[] {
  if (typeof streamId !== 'string' || streamId.length === 0 || streamId.startsWith('$')) {
    throw new InvalidEventError(
      'streamId',
      `stream id must be a non-empty string not starting with $, got ${JSON.stringify(streamId)}`,
    );
  }
  if (events.length === 0) throw new InvalidEventError('events', 'an append needs at least one event');
  return events.map((event, index) => {
    // Each member is read once and the prepared event built from what was checked: a getter
    // cannot pass the checks with one value and hand the writer another (decision 0044).
    const { id, type, data, schemaVersion, correlationId, causationId, actor, tenant } = event;
    if (typeof id !== 'string' || !UUID.test(id)) {
      const got = typeof id === 'string' ? JSON.stringify(id) : `a ${typeof id}`;
      throw new InvalidEventError(`events[${index}].id`, `event id must be a UUID string, got ${got}`);
    }
    if (typeof type !== 'string' || type.length === 0) {
      throw new InvalidEventError(`events[${index}].type`, 'event type must be a non-empty string');
    }
    checkEnvelope({ schemaVersion, correlationId, causationId, actor, tenant }, index);
    try {
      const dataJson = canonicalJson(data);
      return { id, type, data, schemaVersion, correlationId, causationId, actor, tenant, dataJson };
    } catch (error) {
      throw new InvalidEventError(`events[${index}].data`, `event data must be JSON: ${(error as Error).message}`);
    }
  });
}

/** The largest schema version the log stores (a 32-bit integer column). */
const MAX_SCHEMA_VERSION = 2 ** 31 - 1;
const ENVELOPE_TEXTS = ['correlationId', 'causationId', 'actor', 'tenant'] as const;

/**
 * The envelope is hashed and stored as given: a value the hash or the store cannot take would
 * otherwise fail later, inside a group commit, for every append grouped with it.
 */
function checkEnvelope(event: Omit<NewEvent, 'id' | 'type' | 'data'>, index: number): void {
  const { schemaVersion } = event;
  if (
    schemaVersion !== undefined &&
    !(Number.isInteger(schemaVersion) && schemaVersion >= 1 && schemaVersion <= MAX_SCHEMA_VERSION)
  )
    throw new InvalidEventError(
      `events[${index}].schemaVersion`,
      `schema version must be an integer from 1 to ${MAX_SCHEMA_VERSION}`,
    );
  for (const field of ENVELOPE_TEXTS) {
    const value = event[field];
    if (value !== undefined && typeof value !== 'string')
      throw new InvalidEventError(`events[${index}].${field}`, `${field} must be a string when given`);
  }
}

/** Every part of a multi-stream append prepared, or the first offending field of any. */
export function prepareAppends(appends: readonly StreamAppend[]): PreparedAppend[] {
  return appends.map(({ streamId, events, expectedRevision }) => ({
    streamId,
    expectedRevision,
    events: prepareNewEvents(streamId, events),
  }));
}

export function checkExpectedRevision(
  streamId: string,
  expected: ExpectedRevision,
  actual: StreamState,
): WrongExpectedRevisionError | undefined {
  const ok =
    expected === ANY ||
    (expected === NO_STREAM && actual === NO_STREAM) ||
    (expected === STREAM_EXISTS && actual !== NO_STREAM) ||
    (typeof expected === 'bigint' && actual === expected);
  return ok ? undefined : new WrongExpectedRevisionError(streamId, expected, actual);
}

/**
 * Decides what one append stores, given the stream's head and the events it already holds by id.
 * Duplicates are dropped first (within the batch too); the expected revision is checked only if
 * something new remains, so an exact retry of an acknowledged batch is a success.
 */
export function planAppend(
  streamId: string,
  head: StreamHead,
  known: Pick<ReadonlyMap<string, KnownEvent>, 'get'>,
  events: readonly PreparedEvent[],
  expected: ExpectedRevision,
  recordedAt: Date,
): AppendPlan {
  const duplicates: string[] = [];
  const fresh: PreparedEvent[] = [];
  const seen = new Set<string>();
  let lastKnown: KnownEvent | undefined;
  for (const event of events) {
    const id = event.id.toLowerCase();
    const existing = known.get(id);
    if (existing || seen.has(id)) {
      duplicates.push(id);
      if (existing && (!lastKnown || existing.position > lastKnown.position)) lastKnown = existing;
    } else {
      seen.add(id);
      fresh.push(event);
    }
  }
  if (fresh.length === 0) return { kind: 'duplicates_only', duplicates, lastKnown: lastKnown! };

  const error = checkExpectedRevision(streamId, expected, head.revision);
  if (error) return { kind: 'conflict', error };

  let revision = head.revision === NO_STREAM ? -1n : head.revision;
  let prevHash = head.lastHash;
  const at = recordedAt.toISOString();
  // Objects written out member by member, not spread: this runs for every event appended.
  const sealed = fresh.map((event): SealedEvent => {
    revision += 1n;
    const id = event.id.toLowerCase();
    const { type, data } = event;
    const schemaVersion = event.schemaVersion ?? 1;
    const correlationId = event.correlationId ?? null;
    const causationId = event.causationId ?? null;
    const actor = event.actor ?? ANONYMOUS_ACTOR;
    const tenant = event.tenant ?? DEFAULT_TENANT;
    const content = {
      streamId,
      revision,
      id,
      type,
      data,
      recordedAt: at,
      schemaVersion,
      correlationId,
      causationId,
      actor,
      tenant,
    };
    const hash = chainHash(prevHash, content, event.dataJson);
    const metadata = { recordedAt: at, schemaVersion, correlationId, causationId, actor, tenant, prevHash, hash };
    prevHash = hash;
    return { id, type, streamId, revision, data, metadata };
  });
  const dataJson = fresh.map((event) => event.dataJson);
  return { kind: 'write', events: sealed, dataJson, duplicates, head: { revision, lastHash: prevHash } };
}

/**
 * What an append reports once its plan has been carried out: the conflict, or the stream's
 * revision and the events as recorded, each at the position `positionOf` says the log gave it.
 */
export function appendResult(
  plan: AppendPlan,
  headRevision: StreamState,
  positionOf: (event: SealedEvent) => bigint,
): AppendResult | WrongExpectedRevisionError {
  switch (plan.kind) {
    case 'conflict':
      return plan.error;
    case 'duplicates_only':
      return {
        nextExpectedRevision: headRevision as bigint,
        position: plan.lastKnown.position,
        appended: 0,
        duplicates: plan.duplicates,
        events: [],
      };
    case 'write': {
      const events = plan.events.map((event) => recordedEvent(event, positionOf(event)));
      return {
        nextExpectedRevision: plan.head.revision as bigint,
        position: events.at(-1)!.position,
        appended: events.length,
        duplicates: plan.duplicates,
        events,
      };
    }
  }
}

/** A sealed event at the position the log gave it, written out member by member (not spread): this runs for every event appended. */
export function recordedEvent(event: SealedEvent, position: bigint, data: unknown = event.data): RecordedEvent {
  const { id, type, streamId, revision, metadata } = event;
  return { id, type, streamId, revision, data, metadata, position };
}

export function matchesFilter(
  event: Pick<RecordedEvent, 'type' | 'streamId'>,
  filter: EventFilter | undefined,
): boolean {
  if (!filter) return true;
  const { eventTypePrefixes, streamPrefixes } = filter;
  if (eventTypePrefixes && !eventTypePrefixes.some((prefix) => event.type.startsWith(prefix))) return false;
  if (streamPrefixes && !streamPrefixes.some((prefix) => event.streamId.startsWith(prefix))) return false;
  return true;
}
