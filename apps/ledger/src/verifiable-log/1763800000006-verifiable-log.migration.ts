import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The Merkle log (decision 0017): one leaf per event in log order, every perfect subtree's hash,
 * and every checkpoint the service signed. Append-only: no rebuild ever clears these tables.
 */
export class VerifiableLog1763800000006 implements MigrationInterface {
  readonly name = 'VerifiableLog1763800000006';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE log_leaves (
        leaf_index  bigint PRIMARY KEY,
        position    bigint NOT NULL UNIQUE,
        stream_id   text   NOT NULL,
        revision    bigint NOT NULL,
        event_hash  text   NOT NULL
      )`);
    await queryRunner.query(`CREATE INDEX log_leaves_stream_idx ON log_leaves (stream_id, revision)`);
    await queryRunner.query(`
      CREATE TABLE log_nodes (
        level       smallint NOT NULL,
        node_index  bigint   NOT NULL,
        hash        bytea    NOT NULL,
        PRIMARY KEY (level, node_index)
      )`);
    await queryRunner.query(`
      CREATE TABLE log_checkpoints (
        tree_size  bigint      PRIMARY KEY,
        root_hash  bytea       NOT NULL,
        key_id     text        NOT NULL,
        note       text        NOT NULL,
        signed_at  timestamptz NOT NULL DEFAULT now()
      )`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE log_checkpoints, log_nodes, log_leaves`);
  }
}
