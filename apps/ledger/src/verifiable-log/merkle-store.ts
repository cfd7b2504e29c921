import {
  CompactRange,
  NoteError,
  nodeMap,
  openCheckpoint,
  nodesForRanges,
  perfectSubtrees,
  type Hash,
  type LeafRange,
  type NodeId,
  type NodeLookup,
  type NoteVerifier,
} from '#core';
import type { ClientBase, Pool, PoolClient } from 'pg';
import type { BatchStatement } from '../projections/projection.js';
import { LogForkError } from './log-fork-error.js';

/**
 * The Merkle log's tables (migrations 1763800000006 and 1763800000310): reads and writes shared by
 * the consumer, the signer, the proofs and the audit. A leaf row names its stream by number and holds its
 * event hash as bytes; `StoredLeaf` gives them back as the stream id and hex.
 */
export type Queryable = Pool | ClientBase;

/** The tables the Merkle log's leaves and nodes take (not its checkpoints, one per signing). */
export const MERKLE_LOG_TABLES = ['log_leaves', 'log_leaf_streams', 'log_nodes'] as const;

export interface StoredLeaf {
  readonly leafIndex: bigint;
  readonly position: bigint;
  readonly streamId: string;
  readonly revision: bigint;
  readonly eventHash: string;
}

export interface StoredCheckpoint {
  readonly treeSize: bigint;
  readonly rootHash: Hash;
  readonly keyId: string;
  readonly note: string;
}

/**
 * The tree the consumer has built: its size and the position of its last leaf's event. Its last leaf is the
 * highest index with both its row and its leaf node (level 0), which the consumer writes together. A row or
 * a node alone, edited in to claim an index past the tree, moves neither where the consumer numbers the next
 * leaves nor what is signed; verify names an event whose row claims such an index. The size is counted here,
 * not in SQL, so that no claimed index overflows.
 */
export async function treeHead(db: Queryable): Promise<{ size: bigint; lastPosition: bigint }> {
  const { rows } = await db.query<{ leaf_index: string; position: string }>(
    `SELECT l.leaf_index, l.position FROM log_leaves l
      WHERE EXISTS (SELECT 1 FROM log_nodes n WHERE n.level = 0 AND n.node_index = l.leaf_index)
      ORDER BY l.leaf_index DESC LIMIT 1`,
  );
  return rows[0]
    ? { size: BigInt(rows[0].leaf_index) + 1n, lastPosition: BigInt(rows[0].position) }
    : { size: 0n, lastPosition: 0n };
}

export async function fetchNodes(db: Queryable, nodes: readonly NodeId[]): Promise<NodeLookup> {
  const { rows } = await db.query<{ level: number; node_index: string; hash: Buffer }>(
    `SELECT level, node_index, hash FROM log_nodes
      WHERE (level, node_index) IN (SELECT * FROM unnest($1::smallint[], $2::bigint[]))`,
    [nodes.map((node) => node.level), nodes.map((node) => node.index.toString())],
  );
  return nodeMap(rows.map((row) => [{ level: row.level, index: BigInt(row.node_index) }, row.hash] as const));
}

/** The stored tree of `size` leaves as a compact range: the nodes of its right edge. */
export async function storedRange(db: Queryable, size: bigint): Promise<CompactRange> {
  const edge = size === 0n ? [] : perfectSubtrees({ start: 0n, end: size });
  return CompactRange.of(size, await fetchNodes(db, edge));
}

/** The stored nodes `ranges` need. */
export function fetchRangeNodes(db: Queryable, ranges: readonly LeafRange[]): Promise<NodeLookup> {
  return fetchNodes(db, nodesForRanges(ranges));
}

/**
 * A batch's leaves and their nodes as one statement, which the Merkle consumer's runner runs with its checkpoint's
 * move (decision 0054). A stream seen for the first time gets its number in the same statement. Only the instance
 * leading the consumer writes here, so no other statement adds the same stream meanwhile; if one did, its leaves
 * would find no number, and the NULL `stream_no` fails the statement rather than drop them. Rows go in by leaf
 * index (the join does not keep their order), so the indexes on it fill their pages.
 */
export function leavesStatement(
  leaves: readonly StoredLeaf[],
  nodes: readonly (readonly [NodeId, Hash])[],
): BatchStatement {
  return {
    name: 'merkle-log-insert-leaves',
    text: `WITH leaf AS (
        SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::bigint[], $5::text[])
          AS t(leaf_index, position, stream_id, revision, event_hash)
      ), added AS (
        INSERT INTO log_leaf_streams (stream_id)
        SELECT DISTINCT stream_id FROM leaf
         WHERE NOT EXISTS (SELECT 1 FROM log_leaf_streams s WHERE s.stream_id = leaf.stream_id)
        ON CONFLICT (stream_id) DO NOTHING
        RETURNING stream_no, stream_id
      ), stream AS (
        SELECT stream_no, stream_id FROM added
        UNION ALL
        SELECT stream_no, stream_id FROM log_leaf_streams WHERE stream_id IN (SELECT stream_id FROM leaf)
      ), node AS (
        INSERT INTO log_nodes (level, node_index, hash) SELECT * FROM unnest($6::smallint[], $7::bigint[], $8::bytea[])
      )
      INSERT INTO log_leaves (leaf_index, position, stream_no, revision, event_hash)
      SELECT leaf.leaf_index, leaf.position, stream.stream_no, leaf.revision, decode(leaf.event_hash, 'hex')
        FROM leaf LEFT JOIN stream USING (stream_id)
       ORDER BY leaf.leaf_index`,
    values: [
      leaves.map((leaf) => leaf.leafIndex.toString()),
      leaves.map((leaf) => leaf.position.toString()),
      leaves.map((leaf) => leaf.streamId),
      leaves.map((leaf) => leaf.revision.toString()),
      leaves.map((leaf) => leaf.eventHash),
      nodes.map(([node]) => node.level),
      nodes.map(([node]) => node.index.toString()),
      nodes.map(([, hash]) => hash),
    ],
  };
}

/** Whether a leaf row's index lies in the tree of `treeSize` leaves: an edited row can claim any, negative ones too. */
export function isLeafOf(treeSize: bigint, leafIndex: bigint | undefined): boolean {
  return leafIndex !== undefined && leafIndex >= 0n && leafIndex < treeSize;
}

/** The leaf index of each event position that has a leaf: what proofs need, read from the leaf rows alone. */
export async function leafIndexesAtPositions(
  db: Queryable,
  positions: readonly bigint[],
): Promise<Map<bigint, bigint>> {
  const { rows } = await db.query<{ position: string; leaf_index: string }>(
    'SELECT position, leaf_index FROM log_leaves WHERE position = ANY($1::bigint[])',
    [positions.map(String)],
  );
  return new Map(rows.map((row) => [BigInt(row.position), BigInt(row.leaf_index)]));
}

/** The leaves recorded for a stream (up to `maxPosition`): what the stream held when the consumer read it. */
export async function leavesOfStream(db: Queryable, streamId: string, maxPosition?: bigint): Promise<StoredLeaf[]> {
  const { rows } = await db.query<LeafRow>(
    `${SELECT_LEAVES} WHERE s.stream_id = $1 AND ($2::bigint IS NULL OR l.position <= $2) ORDER BY l.revision`,
    [streamId, maxPosition?.toString() ?? null],
  );
  return rows.map(leafOf);
}

/** The leaf rows from index `start` up to `end` (exclusive), in index order, a page of `pageSize` at a time. */
export function leafRowPages(
  db: Queryable,
  start: bigint,
  end: bigint,
  pageSize: number,
): AsyncGenerator<StoredLeaf[], void> {
  const text = `${SELECT_LEAVES} WHERE l.leaf_index >= $1 AND l.leaf_index < $2 ORDER BY l.leaf_index LIMIT $3`;
  return pagesByIndex(db, text, start, end, pageSize, leafOf);
}

/** The row of leaf `leafIndex`, if one claims it. */
export async function leafRowAt(db: Queryable, leafIndex: bigint): Promise<StoredLeaf | undefined> {
  const { rows } = await db.query<LeafRow>(`${SELECT_LEAVES} WHERE l.leaf_index = $1`, [leafIndex.toString()]);
  return rows[0] && leafOf(rows[0]);
}

/**
 * Removes the stored leaves from index `from` on, and what no tree holds: their rows and rows of negative index,
 * every node whose subtree holds one of them, and nodes of no level or index a tree has. One edited in where the
 * consumer adds a leaf would stop it. The number of rows and nodes removed.
 */
export async function dropLeaves(client: PoolClient, from: bigint): Promise<number> {
  const rows = await client.query('DELETE FROM log_leaves WHERE leaf_index >= $1 OR leaf_index < 0', [from.toString()]);
  // A node of level l and index i holds leaves i·2^l to (i + 1)·2^l - 1; in numeric, so that no edited index overflows.
  const nodes = await client.query(
    `DELETE FROM log_nodes
      WHERE level NOT BETWEEN 0 AND 63 OR node_index < 0 OR (node_index::numeric + 1) * power(2::numeric, level) > $1`,
    [from.toString()],
  );
  return (rows.rowCount ?? 0) + (nodes.rowCount ?? 0);
}

/** The stored leaf hashes (level-0 nodes) from index `start` up to `end` (exclusive), in index order, a page at a time. */
export function leafNodePages(
  db: Queryable,
  start: bigint,
  end: bigint,
  pageSize: number,
): AsyncGenerator<{ leafIndex: bigint; hash: Hash }[], void> {
  const text = `SELECT node_index, hash FROM log_nodes
    WHERE level = 0 AND node_index >= $1 AND node_index < $2 ORDER BY node_index LIMIT $3`;
  return pagesByIndex(db, text, start, end, pageSize, (row: { node_index: string; hash: Buffer }) => ({
    leafIndex: BigInt(row.node_index),
    hash: row.hash,
  }));
}

/** Rows of `text` ($1 the first index, $2 the end, $3 the page size) turned into items, page after page, by index. */
async function* pagesByIndex<Row extends object, Item extends { leafIndex: bigint }>(
  db: Queryable,
  text: string,
  start: bigint,
  end: bigint,
  pageSize: number,
  itemOf: (row: Row) => Item,
): AsyncGenerator<Item[], void> {
  for (let from = start; from < end;) {
    const { rows } = await db.query<Row>(text, [from.toString(), end.toString(), pageSize]);
    const items = rows.map(itemOf);
    if (items.length > 0) yield items;
    if (items.length < pageSize) return;
    from = items.at(-1)!.leafIndex + 1n;
  }
}

type CheckpointRow = { tree_size: string; root_hash: Buffer; key_id: string; note: string };
const checkpointOf = (row: CheckpointRow): StoredCheckpoint => ({
  treeSize: BigInt(row.tree_size),
  rootHash: row.root_hash,
  keyId: row.key_id,
  note: row.note,
});
/** `log_checkpoints.tree_size` is a bigint: a tree larger than this was edited in, and is not signed. */
export const MAX_TREE_SIZE = 2n ** 63n - 1n;
/** Rows read per query while rows that are not checkpoints are passed over. */
const CHECKPOINT_PAGE = 100;
/** Past this many rows of a key in a row that are not its checkpoints, the table was flooded: reading stops. */
const MAX_ROWS_PASSED_OVER = 1_000;

/**
 * The newest checkpoint signed with `verifier`'s key (at `treeSize` when given): the newest row of its key id whose
 * note the key opens at the size the row is stored under, with the size and root the note signs. A row is the
 * database's word: one holding junk, or a genuine note copied under another size, is passed over (decision 0050).
 * Throws a LogForkError past 1,000 such rows, each costing a signature check at most.
 */
export async function signedCheckpointAt(
  db: Queryable,
  verifier: NoteVerifier,
  treeSize?: bigint,
): Promise<StoredCheckpoint | undefined> {
  let passedOver = 0;
  for (let below = MAX_TREE_SIZE; passedOver < MAX_ROWS_PASSED_OVER;) {
    const { rows } = await db.query<CheckpointRow>(
      treeSize !== undefined
        ? 'SELECT tree_size, root_hash, key_id, note FROM log_checkpoints WHERE key_id = $1 AND tree_size = $2'
        : `SELECT tree_size, root_hash, key_id, note FROM log_checkpoints WHERE key_id = $1 AND tree_size < $2
            ORDER BY tree_size DESC LIMIT ${CHECKPOINT_PAGE}`,
      [verifier.keyId, (treeSize ?? below).toString()],
    );
    for (const row of rows) {
      const signed = openedAtItsSize(checkpointOf(row), verifier);
      if (signed) return signed;
    }
    if (treeSize !== undefined || rows.length < CHECKPOINT_PAGE) return undefined;
    passedOver += rows.length;
    below = BigInt(rows.at(-1)!.tree_size);
  }
  throw new LogForkError(
    `the newest ${MAX_ROWS_PASSED_OVER} checkpoint rows of key ${verifier.keyId} hold no checkpoint it signed`,
  );
}

/**
 * The row as the checkpoint its note signs, if the key signed it at the row's size. The shape this service signs
 * (origin, size, root, one signature line), with the row's size on its second line, is checked first: a row that
 * is not one costs no signature check.
 */
function openedAtItsSize(row: StoredCheckpoint, verifier: NoteVerifier): StoredCheckpoint | undefined {
  const lines = row.note.split('\n');
  if (lines.length !== 6 || lines[1] !== row.treeSize.toString()) return undefined;
  try {
    return { ...row, rootHash: openCheckpoint(row.note, verifier).rootHash };
  } catch (error) {
    if (error instanceof NoteError) return undefined;
    throw error;
  }
}

/**
 * The newest checkpoint row of another key (one rotated out) from `atLeast` leaves on: the database's word, its note
 * not opened. Rows below this key's newest checkpoint were checked when it was signed.
 */
export async function newestCheckpointOfAnotherKey(
  db: Queryable,
  keyId: string,
  atLeast: bigint,
): Promise<StoredCheckpoint | undefined> {
  const { rows } = await db.query<CheckpointRow>(
    `SELECT tree_size, root_hash, key_id, note FROM log_checkpoints WHERE key_id <> $1 AND tree_size >= $2
      ORDER BY tree_size DESC LIMIT 1`,
    [keyId, atLeast.toString()],
  );
  return rows[0] && checkpointOf(rows[0]);
}

/**
 * Stores a checkpoint just signed. A row of its key and size already there is not a checkpoint the key signed (the
 * signer starts from the newest that is, and signs no size below it): it is replaced.
 */
export async function storeCheckpoint(client: PoolClient, checkpoint: StoredCheckpoint): Promise<void> {
  await client.query(
    `INSERT INTO log_checkpoints (tree_size, root_hash, key_id, note) VALUES ($1, $2, $3, $4)
     ON CONFLICT (key_id, tree_size) DO UPDATE SET root_hash = excluded.root_hash, note = excluded.note, signed_at = now()`,
    [checkpoint.treeSize.toString(), checkpoint.rootHash, checkpoint.keyId, checkpoint.note],
  );
}

type LeafRow = { leaf_index: string; position: string; stream_id: string; revision: string; event_hash: string };
const SELECT_LEAVES = `SELECT l.leaf_index, l.position, s.stream_id, l.revision, encode(l.event_hash, 'hex') AS event_hash
  FROM log_leaves l JOIN log_leaf_streams s USING (stream_no)`;

function leafOf(row: LeafRow): StoredLeaf {
  return {
    leafIndex: BigInt(row.leaf_index),
    position: BigInt(row.position),
    streamId: row.stream_id,
    revision: BigInt(row.revision),
    eventHash: row.event_hash,
  };
}
