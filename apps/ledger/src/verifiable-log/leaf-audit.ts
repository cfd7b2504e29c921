import { CompactRange, leafHash, linkBreak, type BreakReason, type ChainLink, type Hash } from '#core';
import type { EventLogReader, HashedEvent, ReadAllOptions, ReadAllResult, RecordedEvent } from '#event-log';
import { leafNodePages, leafRowPages, type Queryable, type StoredLeaf } from './merkle-store.js';
import { chainedEvent } from './chained-event.js';

/** A tree grown from the log: its right edge, and the position of its last leaf's event (none: the log's start). */
export interface GrownTree {
  readonly range: CompactRange;
  readonly lastPosition?: bigint;
}

export type LeafBreakReason =
  | 'no_leaf_row'
  | 'no_event'
  | 'event_without_leaf'
  | 'leaf_mismatch'
  | 'root_mismatch'
  | Exclude<BreakReason, 'not_in_log' | 'not_in_checkpoint'>;

/** The first leaf that is not the log's next event, or the first event whose chain breaks, as an audit reports it. */
export interface LeafBreak {
  readonly leafIndex: string | null;
  readonly position: string | null;
  readonly reason: LeafBreakReason;
  readonly expected: string;
  readonly actual: string;
}

export type LeafAudit = { readonly tree: GrownTree; readonly broken?: undefined } | { readonly broken: LeafBreak };

/**
 * The signer reads events (and stored leaves) this many at a time: it runs on the service's thread, and a page is
 * hashed without a pause (about 4 ms here), which is what a request waits behind.
 */
const SIGNER_PAGE = 1_000;
/** The audit, a command of its own, reads events and leaf rows this many at a time. */
const AUDIT_PAGE = 10_000;

/**
 * Grows `from` (mutated) by the log's next events, after `from.lastPosition` in position order, up to `end`
 * leaves: the tree those events make, which the signer compares with the stored one (decision 0049). With
 * `db`, it stops at the first event whose leaf hash is not the stored tree's next leaf, which is where the stored
 * leaves stop being the log's next events: a leaf appended for an event already signed (a rewrite appended anew),
 * or an event deleted or changed after its leaf was added. It reads each event's place and hash alone, and the
 * stored leaf hashes, not the leaf rows: an edited row names its event in verify, and does not stop signing.
 */
export async function growFromLog(
  eventLog: EventLogReader,
  from: GrownTree,
  end: bigint,
  db?: Queryable,
): Promise<GrownTree> {
  const { range } = from;
  let lastPosition = from.lastPosition;
  const nodes = db && new Cursor(leafNodePages(db, range.treeSize, end, SIGNER_PAGE));
  try {
    const read = (options: ReadAllOptions) => eventLog.readAllHashes(options);
    for await (const page of eventPages(read, from.lastPosition, end - range.treeSize, SIGNER_PAGE))
      for (const event of page) {
        const leaf = leafHash(Buffer.from(event.metadata.hash, 'hex'));
        if (nodes) {
          const stored = await nodes.take();
          if (stored?.leafIndex !== range.treeSize || !stored.hash.equals(leaf)) return { range, lastPosition };
        }
        range.append(leaf);
        lastPosition = event.position;
      }
  } finally {
    await nodes?.close();
  }
  return { range, lastPosition };
}

/**
 * The whole log against a checkpoint the auditor trusts (signed with a key they pinned), read beside the leaf
 * rows: each leaf's row names the log's next event (position, stream and revision) and holds its hash; each
 * event chains from the one before it in its stream (its hash recomputed from what it holds); and those events'
 * leaf hashes make the checkpoint's root. So every event up to the checkpoint has exactly one leaf, in position
 * order, none is passed over, and none is another stream's event relabelled. Returns the first break.
 */
export async function auditLog(
  db: Queryable,
  eventLog: EventLogReader,
  checkpoint: { treeSize: bigint; rootHash: Hash },
): Promise<LeafAudit> {
  const range = CompactRange.empty();
  let lastPosition: bigint | undefined;
  const chains = new Map<string, ChainLink>();
  const rows = new Cursor(leafRowPages(db, 0n, checkpoint.treeSize, AUDIT_PAGE));
  const breakAt = (reason: LeafBreakReason, expected: string, actual: string, position?: bigint) => ({
    broken: { leafIndex: String(range.treeSize), position: position?.toString() ?? null, reason, expected, actual },
  });
  const after = () => (lastPosition === undefined ? "the log's start" : `position ${lastPosition}`);
  try {
    for await (const page of eventPages(
      (options) => eventLog.readAll(options),
      undefined,
      checkpoint.treeSize,
      AUDIT_PAGE,
    ))
      for (const event of page) {
        const row = await rows.take();
        const broken = leafRowBreak(row, event, range.treeSize, after());
        if (broken) return breakAt(broken.reason, broken.expected, broken.actual, broken.position);
        const chainBroken = linkBreak(chainedEvent(event), chains.get(event.streamId));
        if (chainBroken) {
          const { reason, expected, actual } = chainBroken;
          return breakAt(reason as LeafBreakReason, expected, actual, event.position);
        }
        chains.set(event.streamId, { revision: event.revision, hash: event.metadata.hash });
        range.append(leafHash(Buffer.from(event.metadata.hash, 'hex')));
        lastPosition = event.position;
      }
    if (range.treeSize < checkpoint.treeSize) {
      const row = await rows.take();
      return breakAt('no_event', `an event after ${after()}`, 'none', row?.position);
    }
  } finally {
    await rows.close();
  }
  if (range.root().equals(checkpoint.rootHash)) return { tree: { range, lastPosition } };
  const [expected, actual] = [checkpoint.rootHash, range.root()].map((root) => root.toString('base64'));
  return { broken: { leafIndex: null, position: null, reason: 'root_mismatch', expected, actual } };
}

/** How leaf `leafIndex`'s row fails to name `event`, the log's next event after `after`. */
function leafRowBreak(
  row: StoredLeaf | undefined,
  event: RecordedEvent,
  leafIndex: bigint,
  after: string,
): { reason: LeafBreakReason; expected: string; actual: string; position: bigint } | undefined {
  if (!row || row.leafIndex !== leafIndex) {
    const actual = row ? `leaf ${row.leafIndex}` : 'none';
    return { reason: 'no_leaf_row', expected: `a row for leaf ${leafIndex}`, actual, position: event.position };
  }
  const at = { position: row.position, expected: `an event at position ${row.position}` };
  if (event.position > row.position)
    return { ...at, reason: 'no_event', actual: `none: the next after ${after} is at ${event.position}` };
  if (event.position < row.position) {
    const actual = `leaf ${leafIndex} names position ${row.position}`;
    return { reason: 'event_without_leaf', expected: "the event's own leaf", actual, position: event.position };
  }
  if (row.streamId !== event.streamId || row.revision !== event.revision) {
    const [expected, actual] = [`${event.streamId}@${event.revision}`, `${row.streamId}@${row.revision}`];
    return { reason: 'leaf_mismatch', expected, actual, position: event.position };
  }
  if (row.eventHash !== event.metadata.hash)
    return { reason: 'leaf_mismatch', expected: event.metadata.hash, actual: row.eventHash, position: event.position };
  return undefined;
}

/** The items of `pages` one at a time: a read only when a page runs out, not a generator's step per item. */
class Cursor<T> {
  private page: readonly T[] = [];
  private at = 0;
  private done = false;

  constructor(private readonly pages: AsyncGenerator<readonly T[], void>) {}

  async take(): Promise<T | undefined> {
    while (this.at === this.page.length && !this.done) {
      const next = await this.pages.next();
      if (next.done) this.done = true;
      else [this.page, this.at] = [next.value, 0];
    }
    return this.page[this.at++];
  }

  async close(): Promise<void> {
    await this.pages.return(undefined);
  }
}

/**
 * Pages of `pageSize` of the log's events after `position` (from its start when none), in position order, `count`
 * events in all: page by page, since a wait per event cost the signer as much as the read.
 */
async function* eventPages<Event extends HashedEvent>(
  read: (options: ReadAllOptions) => Promise<ReadAllResult<Event>>,
  position: bigint | undefined,
  count: bigint,
  pageSize: number,
): AsyncGenerator<readonly Event[], void> {
  let fromPosition = position;
  for (let left = count; left > 0n;) {
    const page = await read({ fromPosition, maxCount: Number(left < BigInt(pageSize) ? left : pageSize) });
    yield page.events;
    left -= BigInt(page.events.length);
    if (page.caughtUp || page.events.length === 0) return;
    fromPosition = page.checkpoint;
  }
}
