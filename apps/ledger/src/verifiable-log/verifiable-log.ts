import {
  CompactRange,
  consistencyProofRanges,
  inclusionProofRanges,
  leafHash,
  MerkleProofError,
  parseVerifierKey,
  rangeHash,
  rangesAroundLeaves,
  rootWithLeaves,
  signCheckpoint,
  treeRoot,
  verifyConsistency,
  verifyInclusion,
  type Checkpoint,
  type Hash,
  type LeafRange,
} from '#core';
import type { EventLogReader } from '#event-log';
import pg, { type Pool, type PoolClient } from 'pg';
import { inTransaction } from '../database/transaction.js';
import { within, type ProjectionRunner } from '../projections/projection-runner.js';
import { ApiError, RetryLater } from '../http/api-error.js';
import type { LogSigningKey } from './log-signing-key.js';
import { growFromLog, type GrownTree } from './leaf-audit.js';
import { LogForkError } from './log-fork-error.js';
import type { RememberedCheckpoint, SignedCheckpointMemory } from './signed-checkpoint-memory.js';
import {
  dropLeaves,
  fetchRangeNodes,
  isLeafOf,
  leafIndexesAtPositions,
  leafRowAt,
  MAX_TREE_SIZE,
  newestCheckpointOfAnotherKey,
  signedCheckpointAt,
  storeCheckpoint,
  storedRange,
  treeHead,
  type Queryable,
  type StoredCheckpoint,
  type StoredLeaf,
} from './merkle-store.js';
import { withNoInstanceRunning } from './instance-lock.js';

export interface InclusionProof {
  readonly position: bigint;
  readonly leafIndex: bigint;
  readonly treeSize: bigint;
  readonly hashes: readonly Hash[];
}

const SIGNING_LOCK_KEY = 7_318_201_017;
/** How long a request waits for the Merkle consumer to reach the events it asks about. */
const CONSUMER_WAIT_MS = 10_000;
/**
 * How long a request waits for a checkpoint to be signed. A signing takes milliseconds; one that checks much of
 * the log (a new key, an instance back after long) holds the signing lock for minutes, and requests stop waiting.
 */
const SIGNING_WAIT_MS = 5_000;
/**
 * How long a signing waits for the signing lock (`lock_timeout`), and how long it runs before the next one in this
 * process starts beside it: one running longer checks much of the log, or waits on a connection that died unseen.
 */
const SIGNING_LOCK_WAIT_MS = 10_000;
const LOCK_NOT_AVAILABLE = '55P03';

/** Another signer held the signing lock for longer than SIGNING_LOCK_WAIT_MS: the signing was not tried. */
export class SigningBusyError extends Error {
  constructor() {
    super(`another signer held the signing lock for ${SIGNING_LOCK_WAIT_MS} ms`);
    this.name = 'SigningBusyError';
  }
}

/** A signed checkpoint the tree must extend, and where it comes from when that is not the database's row of this key. */
interface SignedBound {
  readonly checkpoint: { readonly treeSize: bigint; readonly rootHash: Hash };
  readonly whose?: string;
}

/**
 * What a repair dropped: leaves `treeSize - dropped` to `treeSize - 1`, and the first of them as its row names it
 * (the database's word: the event it names is the one signing stopped at, deleted or changed).
 */
export interface DroppedLeaves {
  readonly treeSize: bigint;
  readonly dropped: bigint;
  /** Rows and nodes removed: the dropped leaves' and those edited in outside any tree. */
  readonly removed: number;
  readonly firstDropped?: StoredLeaf;
}

/** The signed checkpoints the check of new leaves may start from. */
interface StartCandidates {
  readonly own: StoredCheckpoint | undefined;
  readonly remembered: RememberedCheckpoint | undefined;
  readonly predecessors: readonly RememberedCheckpoint[];
}

/**
 * The signed Merkle log (decision 0017): signs checkpoints of the tree the consumer keeps, and
 * serves proofs from its stored subtrees. It never signs a tree that does not extend the last
 * checkpoint it signed, so no two of its checkpoints contradict each other, and it keeps them all.
 */
export class VerifiableLog {
  private readonly verifier;
  /** The signing under way in this process, and the one after it that every caller arriving meanwhile shares. */
  private signing: { readonly done: Promise<StoredCheckpoint>; readonly startedAt: number } | undefined;
  private nextSigning: Promise<StoredCheckpoint> | undefined;

  constructor(
    private readonly pool: Pool,
    private readonly eventLog: EventLogReader,
    readonly key: LogSigningKey,
    private readonly consumer: ProjectionRunner,
    private readonly memory: SignedCheckpointMemory,
  ) {
    this.verifier = parseVerifierKey(key.verifierKey);
  }

  /**
   * Signs the tree as it stands, unless the latest checkpoint already covers it, as far as its new leaves are
   * the log's next events. Where one is not, it signs the leaves before it and throws a LogForkError naming it.
   * One signer at a time across instances; a SigningBusyError when another holds the lock past SIGNING_LOCK_WAIT_MS.
   * In this process a call shares the next signing to start: the one under way may have read the tree before the
   * call, and every caller waiting for the lock would hold a connection. The next starts when the one under way ends,
   * or has run SIGNING_LOCK_WAIT_MS: so at most two of the process's connections wait for the lock, and a signing
   * stuck on a dead connection holds up no other.
   */
  signLatest(): Promise<StoredCheckpoint> {
    if (this.nextSigning) return this.nextSigning;
    const current = this.signing;
    if (!current) return this.startSigning();
    const overtakeInMs = current.startedAt + SIGNING_LOCK_WAIT_MS - Date.now();
    this.nextSigning = within(current.done.then(ignored, ignored), overtakeInMs).then(() => {
      this.nextSigning = undefined;
      return this.startSigning();
    });
    return this.nextSigning;
  }

  private startSigning(): Promise<StoredCheckpoint> {
    const done = inTransaction(this.pool, (client) => this.signUnderLock(client))
      .then(({ checkpoint, refused }) => {
        if (refused) throw refused;
        return checkpoint!;
      })
      .catch((error: unknown) => {
        if (error instanceof pg.DatabaseError && error.code === LOCK_NOT_AVAILABLE) throw new SigningBusyError();
        throw error;
      })
      .finally(() => {
        if (this.signing?.done === done) this.signing = undefined;
      });
    this.signing = { done, startedAt: Date.now() };
    return done;
  }

  private async signUnderLock(client: PoolClient): Promise<{ checkpoint?: StoredCheckpoint; refused?: LogForkError }> {
    await client.query(`SELECT set_config('lock_timeout', $1, true)`, [`${SIGNING_LOCK_WAIT_MS}ms`]);
    await client.query('SELECT pg_advisory_xact_lock($1)', [SIGNING_LOCK_KEY]);
    const own = await signedCheckpointAt(client, this.verifier);
    const remembered = await this.memory.recall();
    const { size } = await treeHead(client);
    if (own && own.treeSize === size && (remembered?.checkpoint.treeSize ?? 0n) <= size) return { checkpoint: own };
    if (size > MAX_TREE_SIZE) throw new LogForkError(`the tree holds ${size} leaves: more than a checkpoint stores`);
    const rootHash = await this.storedRoot(client, size);
    if (!rootHash) throw new LogForkError(`the stored tree of ${size} leaves lacks a node of its root`);
    const { bounds, predecessors } = await this.signedBounds(client, own, remembered);
    for (const bound of bounds) await this.checkExtends(client, bound, size, rootHash);
    // Its new leaves must be the log's next events: a tree that extends the signed one could hold leaves
    // appended for events already signed, rewritten (decision 0049).
    const startFrom = { own, remembered, predecessors };
    const start = await this.checkedStart(client, startFrom);
    const first = start.range.treeSize;
    // The first new leaf alone against the stored one: in a refused state it is the stranger, and the tail is not read.
    let grown = await growFromLog(this.eventLog, start, first < size ? first + 1n : size, client);
    if (grown.range.treeSize > first) {
      grown = await growFromLog(this.eventLog, grown, size);
      // Not the stored tree: again, leaf by leaf against the stored leaves, to find the first that differs.
      if (grown.range.treeSize < size || !grown.range.root().equals(rootHash))
        grown = await growFromLog(this.eventLog, await this.checkedStart(client, startFrom), size, client);
    }
    const signable = grown.range.treeSize;
    const refused = signable < size ? await this.strangerLeaf(client, signable, grown.lastPosition) : undefined;
    // Nothing this key has signed already is signed again.
    const signed = [own?.treeSize ?? 0n, remembered?.checkpoint.treeSize ?? 0n].reduce((a, b) => (a > b ? a : b));
    if (refused && signable <= signed) return { refused };
    const signableRoot = signable === size ? rootHash : await this.storedRoot(client, signable);
    if (!signableRoot?.equals(grown.range.root())) {
      const message = `the stored nodes of leaves ${first} to ${signable - 1n} do not hash to them`;
      return { refused: new LogForkError(message) };
    }
    const note = this.sign(signable, signableRoot);
    const checkpoint = { treeSize: signable, rootHash: signableRoot, keyId: this.key.keyId, note };
    await this.memory.remember(note, grown.lastPosition);
    await storeCheckpoint(client, checkpoint);
    return { checkpoint, refused };
  }

  /**
   * The signed checkpoints a tree must extend: the last of this key in the database, the last one this instance
   * remembers signing (the database's may have been deleted), the last ones the keys before it in this data
   * folder remember, and the database's last of another key (its word).
   */
  private async signedBounds(
    client: Queryable,
    own: StoredCheckpoint | undefined,
    remembered: RememberedCheckpoint | undefined,
  ): Promise<{ bounds: SignedBound[]; predecessors: RememberedCheckpoint[] }> {
    const predecessors = await this.memory.recallRotatedOut();
    const rotatedOut = await newestCheckpointOfAnotherKey(client, this.key.keyId, own?.treeSize ?? 0n);
    const bounds: SignedBound[] = [
      ...(own ? [{ checkpoint: own }] : []),
      ...(remembered ? [{ checkpoint: remembered.checkpoint, whose: `remembered in ${remembered.file}` }] : []),
      ...predecessors.map(({ checkpoint, file }) => ({ checkpoint, whose: `remembered in ${file}` })),
      ...(rotatedOut ? [{ checkpoint: rotatedOut, whose: `the database's row of key ${rotatedOut.keyId}` }] : []),
    ];
    return { bounds, predecessors };
  }

  /**
   * An operator's repair (`cli.js log-repair`, every instance stopped). An event deleted or changed after its leaf
   * was added and before it was signed stops signing at that leaf for good. This drops the stored tree's leaves from
   * the first one that is not the log's next event, and rewinds the Merkle consumer to the event of the last leaf
   * kept, proven by its inclusion in the kept tree: it adds the log's events again from there, and signing goes on.
   * It never drops a signed leaf: a stranger inside a checkpoint of this key, or of any it knows of, is refused
   * (LogForkError), as is a tree rolled back below one, or that does not extend them. Rows and nodes edited in
   * outside any tree go too: one where the consumer adds its next leaf stops it.
   */
  async dropUnprovenLeaves(): Promise<DroppedLeaves> {
    return withNoInstanceRunning(this.pool, () =>
      this.consumer.rewound<DroppedLeaves>(async (client) => {
        await client.query('SELECT pg_advisory_xact_lock($1)', [SIGNING_LOCK_KEY]);
        const own = await signedCheckpointAt(client, this.verifier);
        const remembered = await this.memory.recall();
        const { size } = await treeHead(client);
        const { bounds, predecessors } = await this.signedBounds(client, own, remembered);
        for (const bound of bounds)
          if (bound.checkpoint.treeSize > size)
            throw new LogForkError(
              `the tree holds ${size} leaves but ${named(bound)} was signed: it was rolled back, and a repair does not undo that`,
            );
        const start = await this.checkedStart(client, { own, remembered, predecessors });
        const end = size > MAX_TREE_SIZE ? MAX_TREE_SIZE : size;
        const grown = await growFromLog(this.eventLog, start, end, client);
        const kept = grown.range.treeSize;
        for (const bound of bounds)
          if (bound.checkpoint.treeSize > kept) {
            const stranger = await this.strangerLeaf(client, kept, grown.lastPosition);
            throw new LogForkError(`${stranger.message}; ${named(bound)} signed it, and a repair drops no signed leaf`);
          }
        const rootHash = await this.storedRoot(client, kept);
        if (!rootHash?.equals(grown.range.root()))
          throw new LogForkError(`the stored nodes of the first ${kept} leaves do not hash to them`);
        for (const bound of bounds) await this.checkExtends(client, bound, kept, rootHash);
        // Where the consumer resumes: the event of the last leaf kept, as its row names it and its inclusion proves,
        // and where the check of the leaves reached (a position remembered in the data folder is not signed).
        const resumeAt = kept === 0n ? 0n : await this.lastLeafPosition(client, { treeSize: kept, rootHash });
        if (resumeAt !== (grown.lastPosition ?? 0n))
          throw new LogForkError(
            `the last leaf kept, ${kept - 1n}, is the event at position ${resumeAt}, not at ${grown.lastPosition} ` +
              "where the check from the signed checkpoint reached: is the signer's memory edited?",
          );
        const firstDropped = kept < size ? await leafRowAt(client, kept) : undefined;
        const removed = await dropLeaves(client, kept);
        return { position: resumeAt, result: { treeSize: size, dropped: size - kept, removed, firstDropped } };
      }),
    );
  }

  /** The root of the stored tree's first `size` leaves, or undefined when it lacks a node of it. */
  private async storedRoot(client: Queryable, size: bigint): Promise<Hash | undefined> {
    const lookup = await fetchRangeNodes(client, size === 0n ? [] : [{ start: 0n, end: size }]);
    return unlessNodeMissing(() => treeRoot(size, lookup));
  }

  /**
   * Where the check of new leaves starts: a signed checkpoint's stored right edge (it must make the signed
   * root) and the position of its last leaf's event. The newest checkpoint remembered in the data folder with its
   * position, by this key or one rotated out: the position was kept outside the database. Without one (memories of
   * an earlier version, a new instance), the newest checkpoint signed with this key, and the position its last
   * leaf's row names, once the event there is proven to be that leaf. Another key's checkpoint in the database is
   * its word (its root is not checked): a new key in a new data folder starts from the first leaf.
   */
  private async checkedStart(
    client: Queryable,
    { own, remembered, predecessors }: StartCandidates,
  ): Promise<GrownTree> {
    const positioned = [remembered, ...predecessors]
      .filter((memory): memory is RememberedCheckpoint => memory?.lastPosition !== undefined)
      .reduce<RememberedCheckpoint | undefined>(
        (best, next) => (!best || next.checkpoint.treeSize > best.checkpoint.treeSize ? next : best),
        undefined,
      );
    if (positioned)
      return { range: await this.signedRange(client, positioned.checkpoint), lastPosition: positioned.lastPosition };
    const newest = remembered && (!own || own.treeSize <= remembered.checkpoint.treeSize) ? remembered.checkpoint : own;
    if (!newest || newest.treeSize === 0n) return { range: CompactRange.empty() };
    return { range: await this.signedRange(client, newest), lastPosition: await this.lastLeafPosition(client, newest) };
  }

  /** The position of the event that is `checkpoint`'s last leaf: its row's word, proven by the event's hash. */
  private async lastLeafPosition(client: Queryable, checkpoint: { treeSize: bigint; rootHash: Hash }): Promise<bigint> {
    const last = checkpoint.treeSize - 1n;
    const unproven = new LogForkError(
      `no event is proven to be leaf ${last}, the last of checkpoint ${checkpoint.treeSize}`,
    );
    const row = await leafRowAt(client, last);
    if (!row) throw unproven;
    const [event] = await this.eventLog.readStream(row.streamId, { fromRevision: row.revision, maxCount: 1 });
    const proof = (await this.inclusionProofs([row.position], checkpoint.treeSize, client)).get(row.position);
    if (event?.position !== row.position || proof?.leafIndex !== last) throw unproven;
    const leaf = leafHash(Buffer.from(event.metadata.hash, 'hex'));
    try {
      verifyInclusion(leaf, last, checkpoint.treeSize, proof.hashes, checkpoint.rootHash);
    } catch (error) {
      if (error instanceof MerkleProofError) throw unproven;
      throw error;
    }
    return row.position;
  }

  /** The stored right edge of a checkpoint's tree, once it is shown to make the checkpoint's root. */
  private async signedRange(
    client: Queryable,
    checkpoint: { treeSize: bigint; rootHash: Hash },
  ): Promise<CompactRange> {
    const range = await storedRange(client, checkpoint.treeSize).catch((error: unknown) => {
      if (!(error instanceof MerkleProofError)) throw error;
      throw new LogForkError(`the stored tree lacks a node of checkpoint ${checkpoint.treeSize}`);
    });
    if (!range.root().equals(checkpoint.rootHash))
      throw new LogForkError(`the stored nodes do not make the root of checkpoint ${checkpoint.treeSize}`);
    return range;
  }

  /** The refusal naming leaf `leafIndex`, the first that is not the log's next event after `after`. */
  private async strangerLeaf(client: Queryable, leafIndex: bigint, after: bigint | undefined): Promise<LogForkError> {
    const row = await leafRowAt(client, leafIndex);
    const claimed = row ? `, whose row names position ${row.position},` : '';
    const next = after === undefined ? "the log's first event" : `the log's next event after position ${after}`;
    return new LogForkError(`leaf ${leafIndex}${claimed} is not ${next}: signing stops before it`);
  }

  /** Throws a LogForkError unless the tree of `size` leaves with `rootHash` extends the signed `checkpoint`. */
  private async checkExtends(client: Queryable, bound: SignedBound, size: bigint, rootHash: Hash): Promise<void> {
    const { checkpoint } = bound;
    const from = checkpoint.treeSize;
    if (from > size) {
      throw new LogForkError(`the tree holds ${size} leaves but ${named(bound)} was signed: it was rolled back`);
    }
    if (from === 0n) return;
    try {
      const ranges = consistencyProofRanges(from, size);
      const lookup = await fetchRangeNodes(client, ranges);
      const proof = ranges.map((range) => rangeHash(range, lookup));
      verifyConsistency(from, size, proof, checkpoint.rootHash, rootHash);
    } catch (error) {
      if (!(error instanceof MerkleProofError)) throw error;
      throw new LogForkError(`the tree does not extend ${named(bound)}: ${error.message}`);
    }
  }

  /**
   * The newest checkpoint this key signed: the database's, or the one this instance remembers if the database
   * lost it (or its rows of this key were flooded with rows that are not checkpoints).
   */
  async lastSigned(): Promise<StoredCheckpoint | undefined> {
    const stored = await this.newestStored();
    const remembered = await this.remembered();
    return !remembered || (stored && stored.treeSize >= remembered.treeSize) ? stored : remembered;
  }

  private newestStored(): Promise<StoredCheckpoint | undefined> {
    return signedCheckpointAt(this.pool, this.verifier).catch(unlessFork);
  }

  private async remembered(): Promise<StoredCheckpoint | undefined> {
    const remembered = await this.memory.recall();
    return remembered && this.asStored(remembered);
  }

  private asStored({ checkpoint: { treeSize, rootHash }, note }: RememberedCheckpoint): StoredCheckpoint {
    return { treeSize, rootHash, keyId: this.key.keyId, note };
  }

  private sign(treeSize: bigint, rootHash: Hash): string {
    return signCheckpoint({ origin: this.key.signer.name, treeSize, rootHash }, this.key.signer);
  }

  /**
   * A checkpoint this key signed: the one of `treeSize` leaves, or the newest, the database's or the last this
   * process signed or recalled, whichever is newer (the database may have lost its newest rows). The memory file is
   * read only when neither gives one: a damaged file stops signing, not the answers about what is signed.
   */
  async checkpoint(treeSize?: bigint): Promise<StoredCheckpoint | undefined> {
    if (treeSize !== undefined) return signedCheckpointAt(this.pool, this.verifier, treeSize);
    const stored = await this.newestStored();
    const known = this.memory.lastKnown && this.asStored(this.memory.lastKnown);
    if (!stored || !known) return stored ?? known ?? (await this.remembered());
    return known.treeSize > stored.treeSize ? known : stored;
  }

  /**
   * A signed checkpoint whose tree holds every event up to `position`: waits for the consumer, signs
   * one if none does, waiting at most SIGNING_WAIT_MS for it. If the stored tree cannot be signed, the last
   * checkpoint signed: verify and export then name, or refuse, the events it does not hold.
   */
  async checkpointCovering(position: bigint): Promise<StoredCheckpoint> {
    if (!(await this.consumer.waitForPosition(position, CONSUMER_WAIT_MS))) {
      throw new RetryLater('log_behind', 'the Merkle log has not reached these events yet; retry shortly');
    }
    const latest = await this.checkpoint();
    if (latest && (await this.leafCount(position)) <= latest.treeSize) return latest;
    const signing = this.signLatest().catch(async (error: unknown) => {
      if (!(error instanceof LogForkError)) throw error;
      const signed = await this.lastSigned();
      if (!signed)
        throw new ApiError(503, 'log_unsigned', "no checkpoint of the service's key can be signed yet: see its log");
      return signed;
    });
    const signed = await within(signing, SIGNING_WAIT_MS).catch((error: unknown) => {
      if (error instanceof SigningBusyError) return undefined;
      throw error;
    });
    // A request that stops waiting leaves the signing's outcome handled: within() raced it.
    if (!signed) throw new RetryLater('log_signing', 'a checkpoint is being signed and takes long; retry shortly');
    return signed;
  }

  /**
   * How many leaves the tree holds up to and including `position`: one past the leaf of the last event at or
   * below it (the consumer numbers events in position order). A row edited to claim an index past the tree
   * has the tree signed as far as it goes, no further; a negative index is no leaf and is passed over.
   */
  private async leafCount(position: bigint): Promise<bigint> {
    const { rows } = await this.pool.query<{ leaf_index: string }>(
      'SELECT leaf_index FROM log_leaves WHERE position <= $1 AND leaf_index >= 0 ORDER BY position DESC LIMIT 1',
      [position.toString()],
    );
    return rows[0] ? BigInt(rows[0].leaf_index) + 1n : 0n;
  }

  async treeSize(): Promise<bigint> {
    return (await treeHead(this.pool)).size;
  }

  /**
   * Inclusion proofs of the events at `positions` in the tree of `treeSize` leaves; positions without a
   * leaf in that tree, or whose proof needs a node the stored tree lacks (it was edited), are left out.
   */
  async inclusionProofs(
    positions: readonly bigint[],
    treeSize: bigint,
    db: Queryable = this.pool,
  ): Promise<Map<bigint, InclusionProof>> {
    const leaves = [...(await leafIndexesAtPositions(db, positions))].filter(([, leafIndex]) =>
      isLeafOf(treeSize, leafIndex),
    );
    const paths = leaves.map(([, leafIndex]) => inclusionProofRanges(leafIndex, treeSize));
    const lookup = await fetchRangeNodes(db, paths.flat());
    const proofs = new Map<bigint, InclusionProof>();
    leaves.forEach(([position, leafIndex], i) => {
      const hashes = unlessNodeMissing(() => paths[i].map((range) => rangeHash(range, lookup)));
      if (hashes) proofs.set(position, { position, leafIndex, treeSize, hashes });
    });
    return proofs;
  }

  /** Whether the tree of `checkpoint` holds every one of `leaves` (leaf hash by index): one pass, no proof each. */
  async includesAll(leaves: ReadonlyMap<bigint, Hash>, checkpoint: Checkpoint): Promise<boolean> {
    const lookup = await fetchRangeNodes(this.pool, rangesAroundLeaves([...leaves.keys()], checkpoint.treeSize));
    // A stored node missing: the tree was edited, which the proofs of each event will name.
    return (
      unlessNodeMissing(() => rootWithLeaves(leaves, checkpoint.treeSize, lookup).equals(checkpoint.rootHash)) ?? false
    );
  }

  async consistencyProof(from: bigint, to: bigint): Promise<Hash[]> {
    const ranges: LeafRange[] = consistencyProofRanges(from, to);
    const lookup = await fetchRangeNodes(this.pool, ranges);
    const proof = unlessNodeMissing(() => ranges.map((range) => rangeHash(range, lookup)));
    if (!proof) throw new ApiError(409, 'tree_damaged', 'the stored tree lacks a node this proof needs: it was edited');
    return proof;
  }
}

/** A signed bound as errors name it: its size, and whose word it is. */
function named({ checkpoint, whose }: SignedBound): string {
  return `checkpoint ${checkpoint.treeSize} (${whose ?? "this key's, in the database"})`;
}

/** For a promise whose outcome another caller takes care of. */
function ignored(): void {}

/** Undefined for a LogForkError: a read that finds no checkpoint in the database falls back on the signer's memory. */
function unlessFork(error: unknown): undefined {
  if (error instanceof LogForkError) return undefined;
  throw error;
}

/** What `compute` gives, or undefined when it needs a node the stored tree lacks (the tree was edited). */
function unlessNodeMissing<T>(compute: () => T): T | undefined {
  try {
    return compute();
  } catch (error) {
    if (error instanceof MerkleProofError) return undefined;
    throw error;
  }
}
