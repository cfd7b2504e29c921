import { CompactRange, leafHash, type Checkpoint } from '#core';
import type { EventLogReader, HashedEvent } from '#event-log';
import { leafRowsFrom, type Queryable, type StoredLeaf } from './merkle-store.js';

/** A tree the audit starts from: its right edge, and the position of its last leaf's event (none: the log's start). */
export interface AuditedTree {
  readonly range: CompactRange;
  readonly lastPosition?: bigint;
}

export type LeafBreakReason = 'no_leaf_row' | 'no_event' | 'event_without_leaf' | 'leaf_mismatch' | 'root_mismatch';

/** The first leaf that is not the log's next event, in the words of a chain break. */
export interface LeafBreak {
  readonly leafIndex: string | null;
  readonly position: string | null;
  readonly reason: LeafBreakReason;
  readonly expected: string;
  readonly actual: string;
}

export type LeafAudit = { readonly tree: AuditedTree; readonly broken?: undefined } | { readonly broken: LeafBreak };

/** Events and leaf rows are each read this many at a time. */
const AUDIT_PAGE = 10_000;

/**
 * Grows `from` by the log's events after `from.lastPosition`, in position order, up to `end` leaves: the tree
 * those events make, which the caller compares with the one it is about to sign or was given signed. With
 * `db`, each leaf's row must also name its event (position, stream and revision) and hold its hash, and the
 * first that does not is the break: so every event has one leaf, leaves follow positions, and no event is
 * passed over, which a signed tree cannot say by itself (docs/verifiable-log.md). The signer reads the events
 * alone (the rows are verify's: one edited names its event there); an audit of the whole log reads both.
 */
export async function auditLeaves(
  eventLog: EventLogReader,
  from: AuditedTree,
  end: bigint,
  db?: Queryable,
): Promise<LeafAudit> {
  const { range } = from;
  let lastPosition = from.lastPosition;
  const rows = db && leafRowsFrom(db, range.treeSize, end, AUDIT_PAGE);
  const breakAt = (reason: LeafBreakReason, expected: string, actual: string, position?: bigint) => ({
    broken: { leafIndex: String(range.treeSize), position: position?.toString() ?? null, reason, expected, actual },
  });
  const after = () => (lastPosition === undefined ? "the log's start" : `position ${lastPosition}`);
  try {
    // Page by page: the signer reads every new event, and a wait per event cost as much as the read.
    for await (const page of eventPages(eventLog, from.lastPosition, end - range.treeSize)) {
      for (const event of page) {
        if (rows) {
          const row = await nextOf(rows);
          if (!row || row.leafIndex !== range.treeSize)
            return breakAt(
              'no_leaf_row',
              `a row for leaf ${range.treeSize}`,
              row ? `leaf ${row.leafIndex}` : 'none',
              event.position,
            );
          if (event.position > row.position)
            return breakAt(
              'no_event',
              `an event at position ${row.position}`,
              `none: the next after ${after()} is at ${event.position}`,
              row.position,
            );
          if (event.position < row.position)
            return breakAt(
              'event_without_leaf',
              "the event's own leaf",
              `leaf ${range.treeSize} names position ${row.position}`,
              event.position,
            );
          const mismatch = leafMismatch(row, event);
          if (mismatch) return breakAt('leaf_mismatch', mismatch.expected, mismatch.actual, event.position);
        }
        range.append(leafHash(Buffer.from(event.metadata.hash, 'hex')));
        lastPosition = event.position;
      }
    }
    if (range.treeSize < end) {
      const row = rows && (await nextOf(rows));
      return breakAt('no_event', `an event after ${after()}`, 'none', row?.position);
    }
  } finally {
    await rows?.return(undefined);
  }
  return { tree: { range, lastPosition } };
}

/**
 * The whole log against a checkpoint the auditor trusts (signed with a key they pinned): every one of its
 * leaves is the log's next event, and those events' hashes make its root.
 */
export async function auditLog(db: Queryable, eventLog: EventLogReader, checkpoint: Checkpoint): Promise<LeafAudit> {
  const audit = await auditLeaves(eventLog, { range: CompactRange.empty() }, checkpoint.treeSize, db);
  if (audit.broken || audit.tree.range.root().equals(checkpoint.rootHash)) return audit;
  const expected = checkpoint.rootHash.toString('base64');
  const actual = audit.tree.range.root().toString('base64');
  return { broken: { leafIndex: null, position: null, reason: 'root_mismatch', expected, actual } };
}

/** Where a row and the event it names differ: the stream and revision, or the hash. */
function leafMismatch(row: StoredLeaf, event: HashedEvent): { expected: string; actual: string } | undefined {
  if (row.streamId !== event.streamId || row.revision !== event.revision)
    return { expected: `${event.streamId}@${event.revision}`, actual: `${row.streamId}@${row.revision}` };
  if (row.eventHash !== event.metadata.hash) return { expected: event.metadata.hash, actual: row.eventHash };
  return undefined;
}

async function nextOf<T>(iterator: AsyncGenerator<T, void>): Promise<T | undefined> {
  const next = await iterator.next();
  return next.done ? undefined : next.value;
}

/** Pages of the log's events after `position` (from its start when none), in position order, `count` events in all. */
async function* eventPages(
  eventLog: EventLogReader,
  position: bigint | undefined,
  count: bigint,
): AsyncGenerator<readonly HashedEvent[], void> {
  let fromPosition = position;
  for (let left = count; left > 0n;) {
    const maxCount = Number(left < BigInt(AUDIT_PAGE) ? left : AUDIT_PAGE);
    const page = await eventLog.readAllHashes({ fromPosition, maxCount });
    yield page.events;
    left -= BigInt(page.events.length);
    if (page.caughtUp || page.events.length === 0) return;
    fromPosition = page.checkpoint;
  }
}
