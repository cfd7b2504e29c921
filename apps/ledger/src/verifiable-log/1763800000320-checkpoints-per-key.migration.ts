import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A checkpoint per key and size (decision 0050): after a key rotation the new key signs the tree the old
 * one last signed, at the same size. The newest of any key is found by size alone.
 */
export class CheckpointsPerKey1763800000320 implements MigrationInterface {
  readonly name = 'CheckpointsPerKey1763800000320';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE log_checkpoints
        DROP CONSTRAINT log_checkpoints_pkey,
        ADD PRIMARY KEY (key_id, tree_size)`);
    await queryRunner.query(`CREATE INDEX log_checkpoints_tree_size_idx ON log_checkpoints (tree_size)`);
  }

  /** Fails while two keys have signed one size: no checkpoint is deleted to make it pass. */
  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX log_checkpoints_tree_size_idx`);
    await queryRunner.query(`
      ALTER TABLE log_checkpoints
        DROP CONSTRAINT log_checkpoints_pkey,
        ADD PRIMARY KEY (tree_size)`);
  }
}
