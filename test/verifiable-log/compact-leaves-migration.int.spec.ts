import { createHash, randomUUID } from 'node:crypto';
import { leafHash } from '#core';
import { createPostgresEventLog, type RecordedEvent } from '#event-log';
import pg from 'pg';
import { runMigrations } from '../../apps/ledger/src/database/migrations.js';
import { handleBatch } from '../../apps/ledger/src/projections/projection.js';
import { CompactMerkleLeaves1763800000310 } from '../../apps/ledger/src/verifiable-log/1763800000310-compact-merkle-leaves.migration.js';
import { merkleLogConsumer } from '../../apps/ledger/src/verifiable-log/merkle-log.consumer.js';
import {
  leavesStatement,
  leafIndexesAtPositions,
  leavesOfStream,
  treeHead,
  type StoredLeaf,
} from '../../apps/ledger/src/verifiable-log/merkle-store.js';
import { createTestDatabase, undoMigrationsThrough, withClient, type TestDatabase } from '../support/test-database.js';

/**
 * Migration 1763800000310 converts leaves written in the old layout (the stream id and a hex hash on
 * every row): every leaf reads back exactly as it was stored, the consumer goes on adding leaves to old
 * and new streams, a leaf committed by a previous-version writer while it runs is kept, and a hash that
 * is not 64 lowercase hex characters stops the migration with nothing changed.
 */
describe('compact Merkle leaves: converting leaves written in the old layout', () => {
  const created: TestDatabase[] = [];

  const hashOf = (text: string) => createHash('sha256').update(text).digest('hex');
  const leaf = (leafIndex: bigint, streamId: string, revision: bigint): StoredLeaf => ({
    leafIndex,
    position: leafIndex * 3n + 1n,
    streamId,
    revision,
    eventHash: hashOf(`${streamId}/${revision}`),
  });
  const oldLeaves = [
    leaf(0n, 'session-default-a', 0n),
    leaf(1n, 'toolcall-default/t1', 0n),
    leaf(2n, 'session-default-a', 1n),
    // A stream id with quotes and a backslash is stored and read back as it is.
    leaf(3n, `session-x'"\\y`, 0n),
  ];

  /** What the old consumer wrote for `leaves`: their rows and their leaf nodes (the migration leaves nodes alone). */
  async function writeOldLeaves(client: pg.ClientBase, leaves: readonly StoredLeaf[]): Promise<void> {
    await client.query(
      `INSERT INTO log_leaves (leaf_index, position, stream_id, revision, event_hash)
       SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::bigint[], $5::text[])`,
      [
        leaves.map((stored) => stored.leafIndex.toString()),
        leaves.map((stored) => stored.position.toString()),
        leaves.map((stored) => stored.streamId),
        leaves.map((stored) => stored.revision.toString()),
        leaves.map((stored) => stored.eventHash),
      ],
    );
    await client.query(
      'INSERT INTO log_nodes (level, node_index, hash) SELECT 0, * FROM unnest($1::bigint[], $2::bytea[])',
      [
        leaves.map((stored) => stored.leafIndex.toString()),
        leaves.map((stored) => leafHash(Buffer.from(stored.eventHash, 'hex'))),
      ],
    );
  }

  /** A database migrated up to the layout before 1763800000310, holding `leaves` as the old consumer wrote them. */
  async function databaseWithOldLeaves(leaves: readonly StoredLeaf[]): Promise<string> {
    const database = await createTestDatabase({ before: CompactMerkleLeaves1763800000310 });
    created.push(database);
    await withClient(database.connectionString, (client) => writeOldLeaves(client, leaves));
    return database.connectionString;
  }

  afterAll(() => Promise.all(created.map((database) => database.drop())));

  it('reads every converted leaf back as stored, and new leaves go on in old and new streams', async () => {
    const connectionString = await databaseWithOldLeaves(oldLeaves);
    await runMigrations(connectionString);
    const pool = new pg.Pool({ connectionString });
    try {
      const positions = oldLeaves.map((stored) => stored.position);
      const leafIndexes = await leafIndexesAtPositions(pool, positions);
      expect(positions.map((position) => leafIndexes.get(position))).toEqual(oldLeaves.map((old) => old.leafIndex));
      expect(await leavesOfStream(pool, 'session-default-a')).toEqual([oldLeaves[0], oldLeaves[2]]);
      expect(await leavesOfStream(pool, 'toolcall-default/t1')).toEqual([oldLeaves[1]]);
      expect(await leavesOfStream(pool, `session-x'"\\y`)).toEqual([oldLeaves[3]]);
      expect(await treeHead(pool)).toEqual({ size: 4n, lastPosition: oldLeaves[3].position });

      const next = [leaf(4n, 'session-default-a', 2n), leaf(5n, 'session-default-new', 0n)];
      const { name, text, values } = leavesStatement(next, []);
      await pool.query({ name, text, values: [...values] });
      expect(await leavesOfStream(pool, 'session-default-a')).toEqual([oldLeaves[0], oldLeaves[2], next[0]]);
      expect(await leavesOfStream(pool, 'session-default-new')).toEqual([next[1]]);
      const { rows } = await pool.query<{ streams: string; hash_bytes: number }>(
        `SELECT (SELECT count(*) FROM log_leaf_streams) AS streams,
                (SELECT max(octet_length(event_hash)) FROM log_leaves) AS hash_bytes`,
      );
      expect(rows[0]).toEqual({ streams: '4', hash_bytes: 32 });

      // Converted back and forth, the leaves are the same.
      await undoMigrationsThrough(connectionString, 'CompactMerkleLeaves1763800000310');
      const { rows: wide } = await pool.query<{ stream_id: string; event_hash: string }>(
        'SELECT stream_id, event_hash FROM log_leaves ORDER BY leaf_index',
      );
      expect(wide).toEqual(
        [...oldLeaves, ...next].map(({ streamId, eventHash }) => ({ stream_id: streamId, event_hash: eventHash })),
      );
      await runMigrations(connectionString);
      expect(await leavesOfStream(pool, 'session-default-a')).toEqual([oldLeaves[0], oldLeaves[2], next[0]]);
      expect(await leavesOfStream(pool, 'session-default-new')).toEqual([next[1]]);
    } finally {
      await pool.end();
    }
  });

  /**
   * An instance of the previous version still adding leaves while a new one migrates (a rolling start):
   * its batch in flight holds a leaf of a stream never seen before. The migration waits for it, and the
   * leaf is converted with the others instead of being dropped with the old table.
   */
  it('converts a leaf that a previous-version writer commits while the migration waits', async () => {
    const connectionString = await databaseWithOldLeaves(oldLeaves.slice(0, 2));
    const late = leaf(2n, 'session-default-late', 0n);
    await withClient(connectionString, async (writer) => {
      await writer.query('BEGIN');
      await writeOldLeaves(writer, [late]);
      const migrating = runMigrations(connectionString);
      await withClient(connectionString, async (watch) => {
        const waiting = () =>
          watch.query(`SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%log_leaves%'`);
        while ((await waiting()).rowCount === 0) await new Promise((resolve) => setTimeout(resolve, 20));
      });
      await writer.query('COMMIT');
      await migrating;
    });
    const pool = new pg.Pool({ connectionString });
    try {
      expect(await treeHead(pool)).toEqual({ size: 3n, lastPosition: late.position });
      expect(await leavesOfStream(pool, late.streamId)).toEqual([late]);
    } finally {
      await pool.end();
    }
  });

  it.each([
    ['not hex', 'zz'.repeat(32)],
    ['not 32 bytes', 'ab'.repeat(31)],
    // PostgreSQL's decode would take these; the consumer never wrote them, so someone edited the row.
    ['in upper case', 'AB'.repeat(32)],
    ['spaced out', `${'ab '.repeat(32)}`],
  ])('stops at a leaf whose hash is %s, and leaves the old table as it was', async (_, eventHash) => {
    const connectionString = await databaseWithOldLeaves([...oldLeaves, { ...leaf(4n, 'session-b', 0n), eventHash }]);
    await expect(runMigrations(connectionString)).rejects.toThrow();
    await withClient(connectionString, async (client) => {
      const { rows } = await client.query<{ stream_id: string; event_hash: string }>(
        'SELECT stream_id, event_hash FROM log_leaves ORDER BY leaf_index',
      );
      expect(rows.map((row) => row.event_hash)).toEqual([...oldLeaves.map((stored) => stored.eventHash), eventHash]);
      const { rows: tables } = await client.query(`SELECT 1 FROM pg_class WHERE relname = 'log_leaf_streams'`);
      expect(tables).toHaveLength(0);
    });
  });
  it('undoes nothing when a leaf has lost its stream row (the database edited)', async () => {
    const connectionString = await databaseWithOldLeaves(oldLeaves);
    await runMigrations(connectionString);
    await withClient(connectionString, (client) =>
      client.query(`DELETE FROM log_leaf_streams WHERE stream_id = 'toolcall-default/t1'`),
    );
    await expect(undoMigrationsThrough(connectionString, 'CompactMerkleLeaves1763800000310')).rejects.toThrow(
      /copied 3 of 4 leaves/,
    );
    await withClient(connectionString, async (client) => {
      const { rows } = await client.query<{ leaves: string; hash_type: string }>(
        `SELECT (SELECT count(*) FROM log_leaves) AS leaves,
                (SELECT data_type FROM information_schema.columns
                  WHERE table_name = 'log_leaves' AND column_name = 'event_hash') AS hash_type`,
      );
      expect(rows[0]).toEqual({ leaves: '4', hash_type: 'bytea' });
    });
  });

  /** What the consumer stores is what the tree hashes: a hash Node and PostgreSQL would read differently is refused. */
  it.each([
    ['in upper case', 'AB'.repeat(32)],
    ['spaced out', 'ab '.repeat(32)],
    ['of odd length', 'a'.repeat(63)],
  ])('the consumer refuses an event whose hash is %s, and stores no leaf', async (_, hash) => {
    const database = await createTestDatabase();
    const eventLog = await createPostgresEventLog({ connectionString: database.connectionString });
    const pool = new pg.Pool({ connectionString: database.connectionString });
    try {
      const event: RecordedEvent = {
        id: randomUUID(),
        type: 'session.opened',
        streamId: 'session-default-h',
        revision: 0n,
        position: 1n,
        data: {},
        metadata: {
          recordedAt: new Date().toISOString(),
          schemaVersion: 1,
          correlationId: null,
          causationId: null,
          actor: 'test',
          tenant: 'default',
          prevHash: '0'.repeat(64),
          hash,
        },
      };
      const client = await pool.connect();
      try {
        await expect(handleBatch(merkleLogConsumer(), [event], { client, eventLog })).rejects.toThrow(/malformed hash/);
      } finally {
        client.release();
      }
      expect((await treeHead(pool)).size).toBe(0n);
    } finally {
      await pool.end();
      await eventLog.close();
      await database.drop();
    }
  });
});
