import { chainHash, CompactRange, leafHash, nodeMap, type Hash, type NodeId } from '#core';
import type { RecordedEvent } from '#event-log';
import type pg from 'pg';
import { loadTree } from '../../apps/ledger/src/verifiable-log/merkle-log.consumer.js';
import { chainedEvent } from '../../apps/ledger/src/verifiable-log/chained-event.js';

/**
 * What someone holding the database (but not the signing key) does to the verifiable log: edit
 * one event and recompute every hash after it. Returns the new hashes.
 */
export async function rewriteStreamFrom(
  db: pg.Client,
  events: readonly RecordedEvent[],
  from: number,
): Promise<string[]> {
  let prevHash = events[from - 1].metadata.hash;
  const hashes: string[] = [];
  for (const event of events.slice(from)) {
    const data = event.revision === BigInt(from) ? { ...(event.data as object), content: 'rewritten' } : event.data;
    const { position: _position, prevHash: _prev, hash: _hash, ...content } = chainedEvent({ ...event, data });
    const hash = chainHash(prevHash, content);
    await db.query(
      `UPDATE event_log_events SET data = $2, prev_hash = decode($3, 'hex'), hash = decode($4, 'hex')
        WHERE position = $1`,
      [event.position.toString(), JSON.stringify(data), prevHash, hash],
    );
    hashes.push(hash);
    prevHash = hash;
  }
  await db.query(`UPDATE event_log_streams SET last_hash = decode($2, 'hex') WHERE stream_id = $1`, [
    events[0].streamId,
    prevHash,
  ]);
  return hashes;
}

/** `rewriteStreamFrom`, with the rewritten events' leaf rows and every stored node made to agree: only the root tells. */
export async function rewriteWithLeaves(db: pg.Client, events: readonly RecordedEvent[], from: number): Promise<void> {
  const rewritten = await rewriteStreamFrom(db, events, from);
  for (const [i, hash] of rewritten.entries())
    await db.query(`UPDATE log_leaves SET event_hash = decode($2, 'hex') WHERE position = $1`, [
      events[from + i].position.toString(),
      hash,
    ]);
  await rebuildTreeNodes(db);
}

/** Rebuilds every stored subtree hash from the leaf table as it now stands. */
export async function rebuildTreeNodes(db: pg.Client): Promise<void> {
  const { rows } = await db.query<{ event_hash: string }>(
    `SELECT encode(event_hash, 'hex') AS event_hash FROM log_leaves ORDER BY leaf_index`,
  );
  const range = CompactRange.empty();
  const nodes = rows.flatMap((row) => range.append(leafHash(Buffer.from(row.event_hash, 'hex'))));
  await replaceNodes(db, nodes);
}

/** Every stored node replaced by `nodes`. */
async function replaceNodes(db: pg.Client, nodes: readonly (readonly [NodeId, Hash])[]): Promise<void> {
  await db.query('DELETE FROM log_nodes');
  await insertNodes(db, nodes);
}

/** Stores `nodes` (subtree hashes by level and index) as they are, checked against nothing. */
async function insertNodes(db: pg.Client, nodes: readonly (readonly [NodeId, Hash])[]): Promise<void> {
  await db.query(
    'INSERT INTO log_nodes (level, node_index, hash) SELECT * FROM unnest($1::smallint[], $2::bigint[], $3::bytea[])',
    [nodes.map(([node]) => node.level), nodes.map(([node]) => node.index.toString()), nodes.map(([, hash]) => hash)],
  );
}

/**
 * Adds a leaf for each of `hashes` at the end of the stored tree, with the nodes the consumer would
 * store for it, and no leaf row. Returns the leaves' indexes.
 */
async function appendTreeLeaves(db: pg.Client, hashes: readonly string[]): Promise<bigint[]> {
  const { range } = await loadTree(db);
  const indexes = hashes.map((_, i) => range.treeSize + BigInt(i));
  const nodes = hashes.flatMap((hash) => range.append(leafHash(Buffer.from(hash, 'hex'))));
  await insertNodes(db, nodes);
  return indexes;
}

/**
 * Rewrites a signed stream from revision `from` (see `rewriteStreamFrom`), appends the new hashes as new leaves
 * at the end of the stored tree, and points the rewritten events' leaf rows at them. Returns the new leaves' indexes.
 */
export async function reappendRewritten(
  db: pg.Client,
  events: readonly RecordedEvent[],
  from: number,
): Promise<bigint[]> {
  const rewritten = await rewriteStreamFrom(db, events, from);
  const indexes = await appendTreeLeaves(db, rewritten);
  for (const [i, hash] of rewritten.entries())
    await db.query(`UPDATE log_leaves SET leaf_index = $2, event_hash = decode($3, 'hex') WHERE position = $1`, [
      events[from + i].position.toString(),
      indexes[i].toString(),
      hash,
    ]);
  return indexes;
}

/**
 * Rewrites a signed stream from revision `from` (see `rewriteStreamFrom`) at fresh positions past the log's head,
 * where the Merkle consumer takes the rewritten events for the log's next ones. The genuine events leave the log
 * and their leaf rows go to another stream; or, with `decoy`, they stay at their positions under another stream id,
 * with their leaf rows and their stored hashes. Returns the rewritten events' positions.
 */
export async function rewriteAtFreshPositions(
  db: pg.Client,
  events: readonly RecordedEvent[],
  from: number,
  decoy: boolean,
): Promise<bigint[]> {
  const { rows: heads } = await db.query<{ position: string }>('SELECT position FROM event_log_head');
  const head = BigInt(heads[0].position);
  const genuine = events.slice(from).map((event) => event.position.toString());
  const fresh = events.map((event, i) => (i < from ? event : { ...event, position: head + BigInt(i - from + 1) }));
  const streamId = events[0].streamId;
  const elsewhere = decoy ? `${streamId}-decoy` : 'elsewhere';
  if (decoy) {
    await db.query(
      `WITH decoy AS (
         INSERT INTO event_log_streams (stream_id, revision, last_hash)
         SELECT $2, revision, last_hash FROM event_log_streams WHERE stream_id = $1 RETURNING stream_key)
       UPDATE event_log_events SET stream_key = (SELECT stream_key FROM decoy) WHERE position = ANY($3::bigint[])`,
      [streamId, elsewhere, genuine],
    );
    await db.query(
      `INSERT INTO event_log_events (position, stream_key, revision, recorded_at, event_id, envelope_key,
         schema_version, type, causation_id, prev_hash, hash, data)
       SELECT $2::bigint + row_number() OVER (ORDER BY e.position), s.stream_key, e.revision, e.recorded_at, e.event_id,
              e.envelope_key, e.schema_version, e.type, e.causation_id, e.prev_hash, e.hash, e.data
         FROM event_log_events e, event_log_streams s
        WHERE e.position = ANY($1::bigint[]) AND s.stream_id = $3`,
      [genuine, head.toString(), streamId],
    );
  } else {
    for (const [i, event] of fresh.entries())
      if (i >= from)
        await db.query('UPDATE event_log_events SET position = $2 WHERE position = $1', [
          events[i].position.toString(),
          event.position.toString(),
        ]);
  }
  await db.query(
    `WITH elsewhere AS (INSERT INTO log_leaf_streams (stream_id) VALUES ($2) RETURNING stream_no)
     UPDATE log_leaves SET stream_no = (SELECT stream_no FROM elsewhere) WHERE position = ANY($1::bigint[])`,
    [genuine, elsewhere],
  );
  await rewriteStreamFrom(db, fresh, from);
  await db.query('UPDATE event_log_head SET position = $1', [fresh.at(-1)!.position.toString()]);
  return fresh.slice(from).map((event) => event.position);
}

/**
 * An RFC 9162 root does not commit to its tree's size. For a tree of Y = 2^a + r leaves (0 < r < 2^a), the tree of
 * 2^(a+1) + r leaves whose first subtree is the stored [0, 2^a) node and whose last r leaves are Y's last r leaves
 * has Y's root and Y's last leaf. This rebuilds the stored tree that way (`half` = 2^a): the leaf rows from 2^a on
 * move up by 2^a, and every node is replaced.
 */
export async function reshapeTreeUnderItsRoot(db: pg.Client, half: bigint): Promise<void> {
  const level = Math.log2(Number(half));
  const { rows: opaque } = await db.query<{ hash: Buffer }>(
    'SELECT hash FROM log_nodes WHERE level = $1 AND node_index = 0',
    [level],
  );
  // Two steps through negative indexes: the primary key holds at every row.
  await db.query('UPDATE log_leaves SET leaf_index = -leaf_index - 1 - $1 WHERE leaf_index >= $1', [half.toString()]);
  await db.query('UPDATE log_leaves SET leaf_index = -leaf_index - 1 WHERE leaf_index < 0');
  const { rows } = await db.query<{ event_hash: Buffer }>(
    'SELECT event_hash FROM log_leaves WHERE leaf_index >= $1 ORDER BY leaf_index',
    [(2n * half).toString()],
  );
  const opaqueNode = { level: level + 1, index: 0n };
  const range = CompactRange.of(2n * half, nodeMap([[opaqueNode, opaque[0].hash]]));
  const nodes: (readonly [NodeId, Hash])[] = [[opaqueNode, opaque[0].hash]];
  for (const row of rows) nodes.push(...range.append(leafHash(row.event_hash)));
  await replaceNodes(db, nodes);
}
