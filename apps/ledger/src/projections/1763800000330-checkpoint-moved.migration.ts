import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A projection's checkpoint moved inside its batch's statement (decision 0052): the statement sets the
 * position through this function, which refuses (SQLSTATE BLCKP) when the stored position is no longer
 * the one the batch follows, so the whole statement, rows and all, rolls back.
 */
export class CheckpointMoved1763800000330 implements MigrationInterface {
  readonly name = 'CheckpointMoved1763800000330';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE FUNCTION projection_checkpoint_moved(checkpoint text, stored bigint, expected bigint, moved_to bigint)
      RETURNS bigint LANGUAGE plpgsql AS $$
      BEGIN
        IF stored IS DISTINCT FROM expected THEN
          RAISE EXCEPTION 'projection %: checkpoint is no longer %', checkpoint, expected USING ERRCODE = 'BLCKP';
        END IF;
        RETURN moved_to;
      END $$`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP FUNCTION projection_checkpoint_moved(text, bigint, bigint, bigint)`);
  }
}
