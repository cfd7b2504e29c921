import { leafHash, type CompactRange, type Hash, type NodeId } from '#core';
import type { ProjectionDefinition } from '../projections/projection.js';
import { leavesStatement, storedRange, treeHead, type Queryable, type StoredLeaf } from './merkle-store.js';

export const MERKLE_LOG = 'merkle-log';

const SHA256_HEX = /^[0-9a-f]{64}$/;

/**
 * Adds every event of the log, in position order, as the next leaf of the RFC 9162 tree (its
 * leaf data is the event's stored chain hash). Rides the projection runner, so it works on both
 * event-log adapters and is exactly-once: leaves, nodes and checkpoint commit together, in one
 * statement (decision 0054), and an event at or below the last leaf's position is skipped. The tree's
 * right edge is read on the connection that holds the lead, at the first batch after the runner takes
 * it or after a failed batch. It is not a read model: no rebuild clears it, because the signed
 * checkpoints commit to what it holds.
 */
export function merkleLogConsumer(): ProjectionDefinition {
  let tree: { range: CompactRange; lastPosition: bigint } | undefined;
  return {
    name: MERKLE_LOG,
    version: 1,
    filter: {},
    reset() {
      tree = undefined;
    },
    async writes(events, { client }) {
      tree ??= await loadTree(client);
      const leaves: StoredLeaf[] = [];
      const nodes: (readonly [NodeId, Hash])[] = [];
      for (const event of events) {
        if (event.position <= tree.lastPosition) continue;
        const { hash } = event.metadata;
        // The leaf row stores these bytes and the tree hashes them: a hash Node and PostgreSQL would read
        // differently (upper case, blanks, odd length) is refused, and the batch with it.
        if (!SHA256_HEX.test(hash)) throw new Error(`event at position ${event.position} has a malformed hash`);
        leaves.push({
          leafIndex: tree.range.treeSize,
          position: event.position,
          streamId: event.streamId,
          revision: event.revision,
          eventHash: hash,
        });
        nodes.push(...tree.range.append(leafHash(Buffer.from(hash, 'hex'))));
        tree.lastPosition = event.position;
      }
      return leaves.length > 0 ? leavesStatement(leaves, nodes) : undefined;
    },
  };
}

/** The tree as stored: its compact range (the nodes of its right edge) and the position of its last leaf's event. */
export async function loadTree(db: Queryable): Promise<{ range: CompactRange; lastPosition: bigint }> {
  const { size, lastPosition } = await treeHead(db);
  return { range: await storedRange(db, size), lastPosition };
}
