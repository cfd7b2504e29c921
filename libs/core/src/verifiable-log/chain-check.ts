import { chainHash, GENESIS_HASH, type HashedEventContent } from '../hashing/hash-chain.js';

/** An event as the log stores it: what its hash covers, where it sits, and the two hashes it holds. */
export interface ChainedEvent extends HashedEventContent {
  readonly position: bigint;
  readonly prevHash: string;
  readonly hash: string;
}

export type BreakReason =
  /** The stored hash is not the hash of the stored event: something in it changed. */
  | 'hash_mismatch'
  /** The event does not chain from the one before it in its stream. */
  | 'broken_link'
  /** A revision is missing: an event was removed from the stream. */
  | 'missing_event'
  /** The Merkle log holds a different hash at this event's leaf, or no leaf for it. */
  | 'not_in_log'
  /** The event's inclusion proof does not lead to the signed checkpoint's root. */
  | 'not_in_checkpoint';

export interface ChainBreak {
  readonly stream: string;
  readonly revision: string;
  readonly position: string;
  readonly expected: string;
  readonly actual: string;
  readonly reason: BreakReason;
}

export function chainBreak(event: ChainedEvent, reason: BreakReason, expected: string, actual: string): ChainBreak {
  return {
    stream: event.streamId,
    revision: event.revision.toString(),
    position: event.position.toString(),
    expected,
    actual,
    reason,
  };
}

/**
 * The first break in one stream's chain, read from its first revision in order: a gap in
 * revisions, a link to anything but the previous stored hash, or a stored hash that is not the
 * event's. Undefined when the chain holds.
 */
export function firstChainBreak(events: readonly ChainedEvent[]): ChainBreak | undefined {
  let previous: ChainLink | undefined;
  for (const event of events) {
    const broken = linkBreak(event, previous);
    if (broken) return broken;
    previous = event;
  }
  return undefined;
}

/** What the next event of a stream chains from. */
export interface ChainLink {
  readonly revision: bigint;
  readonly hash: string;
}

/**
 * The break, if any, of `event` as the next of its stream after `previous` (none: it is the first): its
 * revision follows, it links to the previous stored hash, and its stored hash is its own.
 */
export function linkBreak(event: ChainedEvent, previous: ChainLink | undefined): ChainBreak | undefined {
  const expectedRevision = previous ? previous.revision + 1n : 0n;
  const previousHash = previous?.hash ?? GENESIS_HASH;
  if (event.revision !== expectedRevision) {
    return chainBreak(event, 'missing_event', `revision ${expectedRevision}`, `revision ${event.revision}`);
  }
  if (event.prevHash !== previousHash) return chainBreak(event, 'broken_link', previousHash, event.prevHash);
  const recomputed = chainHash(event.prevHash, hashedContent(event));
  if (recomputed !== event.hash) return chainBreak(event, 'hash_mismatch', recomputed, event.hash);
  return undefined;
}

/** Exactly the members the chain hash covers. */
function hashedContent(event: ChainedEvent): HashedEventContent {
  const { streamId, revision, id, type, data, recordedAt, schemaVersion, correlationId, causationId, actor, tenant } =
    event;
  return { streamId, revision, id, type, data, recordedAt, schemaVersion, correlationId, causationId, actor, tenant };
}
