import { hash } from 'node:crypto';

/**
 * The RFC 9162 (Certificate Transparency v2, same tree as RFC 6962) Merkle tree over the log
 * (DESIGN §11): hashing, the perfect subtrees a store keeps, proofs built from them, and
 * verification. Pure: a store fetches the nodes `nodesForRanges` names and hands them back.
 *
 * Sizes and indexes are bigint: a tree may outgrow 2^32 leaves, where JavaScript's bit
 * operators on numbers stop working.
 */
export type Hash = Buffer;

const HASH_BYTES = 32;
const LEAF_PREFIX = Buffer.from([0]);
const NODE_PREFIX = Buffer.from([1]);

/** The root of the empty tree: SHA-256 of nothing. */
export const EMPTY_TREE_ROOT: Hash = hash('sha256', Buffer.alloc(0), 'buffer');

// One-shot hashes over the joined bytes: cheaper than a hash object for inputs this small.
export function leafHash(data: Uint8Array): Hash {
  return hash('sha256', Buffer.concat([LEAF_PREFIX, data]), 'buffer');
}

export function nodeHash(left: Uint8Array, right: Uint8Array): Hash {
  return hash('sha256', Buffer.concat([NODE_PREFIX, left, right]), 'buffer');
}

/** A perfect subtree: leaves `[index * 2^level, (index + 1) * 2^level)`. Level 0 nodes are leaf hashes. */
export interface NodeId {
  readonly level: number;
  readonly index: bigint;
}

/** Leaves `[start, end)`; a proof is a list of range hashes. */
export interface LeafRange {
  readonly start: bigint;
  readonly end: bigint;
}

export type NodeLookup = (node: NodeId) => Hash | undefined;

export class MerkleProofError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MerkleProofError';
  }
}

/** The largest power of two strictly below `n` (n ≥ 2): where RFC 9162 splits a tree. */
function splitPoint(n: bigint): bigint {
  let k = 1n;
  while (k << 1n < n) k <<= 1n;
  return k;
}

function isPowerOfTwo(n: bigint): boolean {
  return n > 0n && (n & (n - 1n)) === 0n;
}

function levelOf(powerOfTwo: bigint): number {
  return powerOfTwo.toString(2).length - 1;
}

/** The perfect subtrees whose hashes make up `range`'s hash, in the order RFC 9162's split visits them. */
export function perfectSubtrees({ start, end }: LeafRange): NodeId[] {
  const size = end - start;
  if (size <= 0n) throw new MerkleProofError(`empty range [${start}, ${end})`);
  if (isPowerOfTwo(size) && start % size === 0n) return [{ level: levelOf(size), index: start / size }];
  const k = splitPoint(size);
  return [...perfectSubtrees({ start, end: start + k }), ...perfectSubtrees({ start: start + k, end })];
}

/** MTH(D[start:end]) from stored perfect subtrees. */
export function rangeHash(range: LeafRange, lookup: NodeLookup): Hash {
  const size = range.end - range.start;
  if (size > 0n && isPowerOfTwo(size) && range.start % size === 0n)
    return requireNode(lookup, { level: levelOf(size), index: range.start / size });
  const k = splitPoint(size);
  return nodeHash(
    rangeHash({ start: range.start, end: range.start + k }, lookup),
    rangeHash({ start: range.start + k, end: range.end }, lookup),
  );
}

function requireNode(lookup: NodeLookup, node: NodeId): Hash {
  const hash = lookup(node);
  if (!hash) throw new MerkleProofError(`node (level ${node.level}, index ${node.index}) is missing`);
  return hash;
}

/** The root of the tree of `size` leaves. */
export function treeRoot(size: bigint, lookup: NodeLookup): Hash {
  return size === 0n ? EMPTY_TREE_ROOT : rangeHash({ start: 0n, end: size }, lookup);
}

/** RFC 9162 §2.1.3.1 PATH(index, D[0:size]): the ranges whose hashes prove leaf `index`, bottom up. */
export function inclusionProofRanges(index: bigint, size: bigint): LeafRange[] {
  if (index < 0n || index >= size) throw new MerkleProofError(`leaf ${index} is outside a tree of ${size}`);
  const path = (start: bigint, end: bigint): LeafRange[] => {
    if (end - start === 1n) return [];
    const k = splitPoint(end - start);
    return index < start + k
      ? [...path(start, start + k), { start: start + k, end }]
      : [...path(start + k, end), { start, end: start + k }];
  };
  return path(0n, size);
}

/**
 * RFC 9162 §2.1.4.1 PROOF(first, D[0:second]): the ranges proving the tree of `first` leaves a prefix
 * of the one of `second`.
 */
export function consistencyProofRanges(first: bigint, second: bigint): LeafRange[] {
  if (first < 0n || first > second) throw new MerkleProofError(`no consistency proof from ${first} to ${second}`);
  if (first === 0n || first === second) return [];
  const subproof = (m: bigint, start: bigint, end: bigint, whole: boolean): LeafRange[] => {
    if (m === end - start) return whole ? [] : [{ start, end }];
    const k = splitPoint(end - start);
    return m <= k
      ? [...subproof(m, start, start + k, whole), { start: start + k, end }]
      : [...subproof(m - k, start + k, end, false), { start, end: start + k }];
  };
  return subproof(first, 0n, second, true);
}

/** Every stored node the ranges need, once each. */
export function nodesForRanges(ranges: readonly LeafRange[]): NodeId[] {
  const nodes = new Map<string, NodeId>();
  for (const node of ranges.flatMap(perfectSubtrees)) nodes.set(nodeKey(node), node);
  return [...nodes.values()];
}

export function nodeKey({ level, index }: NodeId): string {
  return `${level}:${index}`;
}

/** A lookup over fetched nodes. */
export function nodeMap(nodes: Iterable<readonly [NodeId, Hash]>): NodeLookup {
  const byKey = new Map<string, Hash>();
  for (const [node, hash] of nodes) byKey.set(nodeKey(node), hash);
  return (node) => byKey.get(nodeKey(node));
}

/**
 * The root of the tree of `size` leaves computed from `leaves` (by index) and, for every part of
 * the tree holding none of them, a stored hash: one pass for many leaves, where an inclusion
 * proof each would hash every path again. Equal to a signed root, it proves them all included.
 */
export function rootWithLeaves(leaves: ReadonlyMap<bigint, Hash>, size: bigint, lookup: NodeLookup): Hash {
  return walkAround(
    [...leaves.keys()].sort(compareBigInt),
    size,
    (range) => rangeHash(range, lookup),
    (index) => leaves.get(index)!,
  );
}

/** The ranges whose stored hashes `rootWithLeaves` needs. */
export function rangesAroundLeaves(indexes: readonly bigint[], size: bigint): LeafRange[] {
  const ranges: LeafRange[] = [];
  walkAround(
    [...indexes].sort(compareBigInt),
    size,
    (range) => (ranges.push(range), EMPTY_TREE_ROOT),
    () => EMPTY_TREE_ROOT,
  );
  return ranges;
}

function compareBigInt(a: bigint, b: bigint): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** RFC 9162's MTH recursion over `[0, size)`, descending only into subtrees that hold one of the sorted `indexes`. */
function walkAround(
  indexes: readonly bigint[],
  size: bigint,
  around: (range: LeafRange) => Hash,
  leaf: (index: bigint) => Hash,
): Hash {
  if (size === 0n) return EMPTY_TREE_ROOT;
  const walk = (start: bigint, end: bigint, lo: number, hi: number): Hash => {
    if (lo === hi) return around({ start, end });
    if (end - start === 1n) return leaf(indexes[lo]);
    const middle = start + splitPoint(end - start);
    let split = lo;
    while (split < hi && indexes[split] < middle) split += 1;
    return nodeHash(walk(start, middle, lo, split), walk(middle, end, split, hi));
  };
  const inside = indexes.filter((index) => index >= 0n && index < size);
  if (inside.length !== indexes.length) throw new MerkleProofError(`a leaf index is outside a tree of ${size}`);
  return walk(0n, size, 0, indexes.length);
}

/**
 * The two indexes RFC 9162's verification algorithms climb the tree with: the node's (`fn`) and the
 * last node's (`sn`).
 */
class ProofWalk {
  constructor(
    public fn: bigint,
    public sn: bigint,
  ) {}

  get atRoot(): boolean {
    return this.sn === 0n;
  }

  /** The next proof hash goes on the left: the node is a right child, or the last one of its level. */
  get hasLeftSibling(): boolean {
    return (this.fn & 1n) === 1n || this.fn === this.sn;
  }

  up(): void {
    this.fn >>= 1n;
    this.sn >>= 1n;
  }

  /** Past the levels where the last node has no right sibling. */
  climbLeftEdge(): void {
    while ((this.fn & 1n) === 0n && this.fn !== 0n) this.up();
  }
}

/** RFC 9162 §2.1.3.2: does `proof` put `leaf` at `index` under `root` of a tree of `size`? Throws why not. */
export function verifyInclusion(
  leaf: Uint8Array,
  index: bigint,
  size: bigint,
  proof: readonly Uint8Array[],
  root: Uint8Array,
): void {
  if (index < 0n || index >= size) throw new MerkleProofError(`leaf index ${index} is outside a tree of ${size}`);
  if (leaf.length !== HASH_BYTES) throw new MerkleProofError('a leaf hash is 32 bytes');
  const walk = new ProofWalk(index, size - 1n);
  let r: Uint8Array = leaf;
  for (const p of proof) {
    if (walk.atRoot) throw new MerkleProofError('inclusion proof is too long');
    if (walk.hasLeftSibling) {
      r = nodeHash(p, r);
      walk.climbLeftEdge();
    } else {
      r = nodeHash(r, p);
    }
    walk.up();
  }
  if (!walk.atRoot) throw new MerkleProofError('inclusion proof is too short');
  if (!Buffer.from(r).equals(root)) throw new MerkleProofError('inclusion proof does not lead to the root');
}

/**
 * RFC 9162 §2.1.4.2: is the tree of `first` leaves with `firstRoot` a prefix of the one of `second`
 * with `secondRoot`?
 */
export function verifyConsistency(
  first: bigint,
  second: bigint,
  proof: readonly Uint8Array[],
  firstRoot: Uint8Array,
  secondRoot: Uint8Array,
): void {
  if (first < 0n || second < first) throw new MerkleProofError(`tree sizes ${first} and ${second} are not in order`);
  // Every tree extends the empty one: there is nothing to prove, so nothing is accepted as proof.
  if (first === 0n) throw new MerkleProofError('there is no consistency proof from an empty tree');
  if (first === second) {
    if (proof.length > 0) throw new MerkleProofError('consistency proof must be empty');
    if (!Buffer.from(firstRoot).equals(secondRoot)) throw new MerkleProofError('same size, different roots');
    return;
  }
  if (proof.length === 0) throw new MerkleProofError('consistency proof is empty');
  const path = isPowerOfTwo(first) ? [firstRoot, ...proof] : [...proof];
  const walk = new ProofWalk(first - 1n, second - 1n);
  while ((walk.fn & 1n) === 1n) walk.up();
  let fr: Uint8Array = path[0];
  let sr: Uint8Array = path[0];
  for (const c of path.slice(1)) {
    if (walk.atRoot) throw new MerkleProofError('consistency proof is too long');
    if (walk.hasLeftSibling) {
      fr = nodeHash(c, fr);
      sr = nodeHash(c, sr);
      walk.climbLeftEdge();
    } else {
      sr = nodeHash(sr, c);
    }
    walk.up();
  }
  if (!walk.atRoot) throw new MerkleProofError('consistency proof is too short');
  if (!Buffer.from(fr).equals(firstRoot))
    throw new MerkleProofError('consistency proof does not lead to the first root');
  if (!Buffer.from(sr).equals(secondRoot))
    throw new MerkleProofError('consistency proof does not lead to the second root');
}

/**
 * The right edge of a growing tree (its perfect subtrees, largest first): enough to append a
 * leaf and compute the root without reading anything back. `append` returns every perfect
 * subtree the new leaf completes, for the store to keep.
 */
export class CompactRange {
  private constructor(
    private size: bigint,
    private readonly edge: Hash[],
  ) {}

  static empty(): CompactRange {
    return new CompactRange(0n, []);
  }

  /** The edge of a tree of `size` leaves, from its stored perfect subtrees. */
  static of(size: bigint, lookup: NodeLookup): CompactRange {
    const edge = size === 0n ? [] : perfectSubtrees({ start: 0n, end: size }).map((node) => requireNode(lookup, node));
    return new CompactRange(size, edge);
  }

  get treeSize(): bigint {
    return this.size;
  }

  append(leaf: Hash): [NodeId, Hash][] {
    let index = this.size;
    let level = 0;
    let hash = leaf;
    const completed: [NodeId, Hash][] = [[{ level, index }, hash]];
    while ((index & 1n) === 1n) {
      hash = nodeHash(this.edge.pop()!, hash);
      index >>= 1n;
      level += 1;
      completed.push([{ level, index }, hash]);
    }
    this.edge.push(hash);
    this.size += 1n;
    return completed;
  }

  root(): Hash {
    if (this.edge.length === 0) return EMPTY_TREE_ROOT;
    return this.edge.reduceRight((right, left) => nodeHash(left, right));
  }
}
