import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Branch trees and forks: each parent's selected child and each session's selected top-level
 * message; a fork's source reference. A fork holds its source's messages under its own id, so
 * message and block rows are keyed by session as well.
 */
export class BranchTrees1763800000003 implements MigrationInterface {
  readonly name = 'BranchTrees1763800000003';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE sessions ADD COLUMN selected_root_id text, ADD COLUMN forked_from jsonb`);
    await queryRunner.query(`ALTER TABLE messages ADD COLUMN selected_child_id text`);
    await queryRunner.query(`ALTER TABLE messages DROP CONSTRAINT messages_pkey, ADD PRIMARY KEY (session_id, id)`);
    await queryRunner.query(
      `ALTER TABLE message_blocks DROP CONSTRAINT message_blocks_pkey, ADD PRIMARY KEY (session_id, id)`,
    );
    await queryRunner.query(`DROP INDEX message_blocks_message_index_idx`);
    await queryRunner.query(
      `CREATE INDEX message_blocks_message_index_idx ON message_blocks (session_id, message_id, index)`,
    );
    // The new columns can only be filled by folding the log again: the projection starts over.
    await queryRunner.query(`TRUNCATE sessions, messages, message_blocks`);
    await queryRunner.query(`DELETE FROM projection_checkpoints WHERE name = 'block-read-models'`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX message_blocks_message_index_idx`);
    await queryRunner.query(`CREATE INDEX message_blocks_message_index_idx ON message_blocks (message_id, index)`);
    await queryRunner.query(`ALTER TABLE message_blocks DROP CONSTRAINT message_blocks_pkey, ADD PRIMARY KEY (id)`);
    await queryRunner.query(`ALTER TABLE messages DROP CONSTRAINT messages_pkey, ADD PRIMARY KEY (id)`);
    await queryRunner.query(`ALTER TABLE messages DROP COLUMN selected_child_id`);
    await queryRunner.query(`ALTER TABLE sessions DROP COLUMN selected_root_id, DROP COLUMN forked_from`);
  }
}
