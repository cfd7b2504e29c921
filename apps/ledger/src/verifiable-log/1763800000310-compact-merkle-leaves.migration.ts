import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A compact leaf row (decision 0047): each stream id is stored once, in `log_leaf_streams`, and a
 * leaf names it by number; the event hash is 32 bytes, not 64 hex characters. A leaf took about
 * 345 bytes with its indexes, most of them the stream id in the heap and again in the stream index.
 * Existing leaves are converted; a hash that is not 64 lowercase hex characters stops the migration. The
 * stream numbers are the Merkle log's own (not the event log's keys), so it stays the same on either engine.
 */
export class CompactMerkleLeaves1763800000310 implements MigrationInterface {
  readonly name = 'CompactMerkleLeaves1763800000310';

  async up(queryRunner: QueryRunner): Promise<void> {
    // An instance of the previous version may still be adding leaves (a rolling start): its batch in
    // flight commits first, and none commits after the copy, where it would be lost with the old table.
    // The strongest lock at once: taking a weaker one and then the drop's could deadlock with that
    // instance's batch, which reads the table before it writes. Its readers wait for the copy.
    await queryRunner.query(`LOCK TABLE log_leaves IN ACCESS EXCLUSIVE MODE`);
    const malformed = (await queryRunner.query(
      `SELECT leaf_index FROM log_leaves WHERE event_hash !~ '^[0-9a-f]{64}$' ORDER BY leaf_index LIMIT 5`,
    )) as { leaf_index: string }[];
    if (malformed.length > 0)
      throw new Error(
        `Merkle leaves ${malformed.map((row) => row.leaf_index).join(', ')} (and perhaps more) hold an event hash ` +
          'that is not 64 lowercase hex characters',
      );
    await queryRunner.query(`
      CREATE TABLE log_leaf_streams (
        stream_no  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        stream_id  text   NOT NULL UNIQUE
      )`);
    await queryRunner.query(`INSERT INTO log_leaf_streams (stream_id) SELECT DISTINCT stream_id FROM log_leaves`);
    await queryRunner.query(`
      CREATE TABLE log_compact_leaves (
        leaf_index  bigint NOT NULL,
        position    bigint NOT NULL,
        stream_no   bigint NOT NULL,
        revision    bigint NOT NULL,
        event_hash  bytea  NOT NULL CONSTRAINT log_leaves_event_hash_bytes CHECK (octet_length(event_hash) = 32)
      )`);
    await queryRunner.query(`
      INSERT INTO log_compact_leaves (leaf_index, position, stream_no, revision, event_hash)
      SELECT l.leaf_index, l.position, s.stream_no, l.revision, decode(l.event_hash, 'hex')
        FROM log_leaves l JOIN log_leaf_streams s USING (stream_id)
       ORDER BY l.leaf_index`);
    await requireEveryLeaf(queryRunner, 'log_compact_leaves');
    await queryRunner.query(`DROP TABLE log_leaves`);
    await queryRunner.query(`ALTER TABLE log_compact_leaves RENAME TO log_leaves`);
    await queryRunner.query(`
      ALTER TABLE log_leaves
        ADD CONSTRAINT log_leaves_pkey PRIMARY KEY (leaf_index),
        ADD CONSTRAINT log_leaves_position_key UNIQUE (position)`);
    await queryRunner.query(`CREATE INDEX log_leaves_stream_idx ON log_leaves (stream_no, revision)`);
    await queryRunner.query(`ANALYZE log_leaves, log_leaf_streams`);
  }

  /** Back to a stream id and a hex hash on every row, under the same lock. */
  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`LOCK TABLE log_leaf_streams, log_leaves IN ACCESS EXCLUSIVE MODE`);
    await queryRunner.query(`
      CREATE TABLE log_wide_leaves (
        leaf_index  bigint PRIMARY KEY,
        position    bigint NOT NULL UNIQUE,
        stream_id   text   NOT NULL,
        revision    bigint NOT NULL,
        event_hash  text   NOT NULL
      )`);
    await queryRunner.query(`
      INSERT INTO log_wide_leaves (leaf_index, position, stream_id, revision, event_hash)
      SELECT l.leaf_index, l.position, s.stream_id, l.revision, encode(l.event_hash, 'hex')
        FROM log_leaves l JOIN log_leaf_streams s USING (stream_no)
       ORDER BY l.leaf_index`);
    await requireEveryLeaf(queryRunner, 'log_wide_leaves');
    await queryRunner.query(`DROP TABLE log_leaves, log_leaf_streams`);
    await queryRunner.query(`ALTER TABLE log_wide_leaves RENAME TO log_leaves`);
    await queryRunner.query(`ALTER INDEX log_wide_leaves_pkey RENAME TO log_leaves_pkey`);
    await queryRunner.query(`ALTER INDEX log_wide_leaves_position_key RENAME TO log_leaves_position_key`);
    await queryRunner.query(`CREATE INDEX log_leaves_stream_idx ON log_leaves (stream_id, revision)`);
  }
}

/** Stops the conversion unless `copy` holds as many leaves as `log_leaves` (a leaf left out of a join). */
async function requireEveryLeaf(queryRunner: QueryRunner, copy: string): Promise<void> {
  const [{ copied, held }] = (await queryRunner.query(
    `SELECT (SELECT count(*) FROM ${copy})::bigint AS copied, (SELECT count(*) FROM log_leaves)::bigint AS held`,
  )) as { copied: string; held: string }[];
  if (copied !== held) throw new Error(`the Merkle leaves' conversion copied ${copied} of ${held} leaves`);
}
