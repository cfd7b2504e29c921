import { leafHash } from '#core';
import { createHash, randomUUID } from 'node:crypto';
import { createPostgresEventLog, NO_STREAM } from '#event-log';
import pg from 'pg';
import { ProjectionRunner } from '../../apps/ledger/src/projections/projection-runner.js';
import { merkleLogConsumer } from '../../apps/ledger/src/verifiable-log/merkle-log.consumer.js';
import { leavesStatement, treeHead, type StoredLeaf } from '../../apps/ledger/src/verifiable-log/merkle-store.js';
import { createTestDatabase, withClient, type TestDatabase } from '../support/test-database.js';

/**
 * The Merkle consumer's batch is one statement (decision 0054): leaf rows, their streams' numbers and the
 * tree's nodes go in together or not at all. A leaf whose stream gets no number is never dropped: the
 * statement fails whole.
 */
describe('the Merkle log batch statement', () => {
  let database: TestDatabase;
  let pool: pg.Pool;

  beforeAll(async () => {
    database = await createTestDatabase();
    pool = new pg.Pool({ connectionString: database.connectionString });
  });

  afterAll(async () => {
    await pool.end();
    await database.drop();
  });

  const leaf = (leafIndex: bigint, streamId: string): StoredLeaf => ({
    leafIndex,
    position: leafIndex + 1n,
    streamId,
    revision: leafIndex,
    eventHash: createHash('sha256').update(`${streamId}/${leafIndex}`).digest('hex'),
  });
  const run = (leaves: readonly StoredLeaf[], db: pg.ClientBase | pg.Pool = pool) => {
    const nodes = leaves.map(
      (stored) => [{ level: 0, index: stored.leafIndex }, leafHash(Buffer.from(stored.eventHash, 'hex'))] as const,
    );
    const { name, text, values } = leavesStatement(leaves, nodes);
    return db.query({ name, text, values: [...values] });
  };
  async function waitUntilBlocked(pid: number): Promise<void> {
    for (;;) {
      const { rows } = await pool.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = $2', [
        pid,
        'Lock',
      ]);
      if (rows.length > 0) return;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }
  const counts = async () => {
    const { rows } = await pool.query<{ leaves: number; nodes: number; streams: number }>(
      `SELECT (SELECT count(*)::int FROM log_leaves) AS leaves, (SELECT count(*)::int FROM log_nodes) AS nodes,
              (SELECT count(*)::int FROM log_leaf_streams) AS streams`,
    );
    return rows[0];
  };

  it('stores the leaves, numbers their new streams and stores their nodes, in one statement', async () => {
    await run([leaf(0n, 'session-a'), leaf(1n, 'session-b'), leaf(2n, 'session-a')]);
    expect(await counts()).toEqual({ leaves: 3, nodes: 3, streams: 2 });
    expect(await treeHead(pool)).toEqual({ size: 3n, lastPosition: 3n });
  });

  it('fails whole, storing no leaf and no node, when a stream is numbered by another transaction meanwhile', async () => {
    const before = await counts();
    const other = await pool.connect();
    const writer = await pool.connect();
    try {
      await other.query('BEGIN');
      await other.query(`INSERT INTO log_leaf_streams (stream_id) VALUES ('session-raced')`);
      const { rows } = await writer.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      // The batch waits on the other transaction's row, then finds it neither added nor in its snapshot.
      const batch = run([leaf(3n, 'session-c'), leaf(4n, 'session-raced')], writer);
      await waitUntilBlocked(rows[0].pid);
      await other.query('COMMIT');
      await expect(batch).rejects.toMatchObject({ code: '23502', column: 'stream_no' });
    } finally {
      other.release();
      writer.release();
    }
    expect(await counts()).toEqual({ ...before, streams: before.streams + 1 });
    expect(await treeHead(pool)).toEqual({ size: 3n, lastPosition: 3n });
  });

  it('the consumer reads its tree on the connection that holds its lead: it runs on a pool of one', async () => {
    const other = await createTestDatabase();
    const eventLog = await createPostgresEventLog({ connectionString: other.connectionString });
    const single = new pg.Pool({ connectionString: other.connectionString, max: 1 });
    const runner = new ProjectionRunner(single, eventLog, merkleLogConsumer(), { retryDelayMs: 20 });
    try {
      runner.start();
      const event = () => ({ id: randomUUID(), type: 'test.event', data: {} });
      const { position } = await eventLog.append('session-single', [event(), event()], NO_STREAM);
      // Watched from outside: the runner's own pool has no connection to spare.
      const tree = () => withClient(other.connectionString, (client) => treeHead(client));
      const deadline = Date.now() + 10_000;
      while ((await tree()).size < 2n && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
      expect(await tree()).toEqual({ size: 2n, lastPosition: position });
    } finally {
      await runner.stop();
      await single.end();
      await eventLog.close();
      await other.drop();
    }
  });
});
