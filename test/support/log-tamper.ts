import { chainHash, CompactRange, leafHash } from '#core';
import type { RecordedEvent } from '#event-log';
import type pg from 'pg';
import { loadTree } from '../../apps/ledger/src/verifiable-log/merkle-log.consumer.js';
import { chainedEvent } from '../../apps/ledger/src/verifiable-log/stream-verifier.js';

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

/** Rebuilds every stored subtree hash from the leaf table as it now stands. */
export async function rebuildTreeNodes(db: pg.Client): Promise<void> {
  const { rows } = await db.query<{ event_hash: string }>(
    `SELECT encode(event_hash, 'hex') AS event_hash FROM log_leaves ORDER BY leaf_index`,
  );
  const range = CompactRange.empty();
  const nodes = rows.flatMap((row) => range.append(leafHash(Buffer.from(row.event_hash, 'hex'))));
  await db.query('DELETE FROM log_nodes');
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
  await db.query(
    'INSERT INTO log_nodes (level, node_index, hash) SELECT * FROM unnest($1::smallint[], $2::bigint[], $3::bytea[])',
    [nodes.map(([node]) => node.level), nodes.map(([node]) => node.index.toString()), nodes.map(([, hash]) => hash)],
  );
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
