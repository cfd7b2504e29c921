import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Messages keep the producer's last recorded seq (`lastSeq`, where a crashed producer resumes).
 * The projection starts over from the log, so existing rows get it too (and assistant messages
 * created with their whole content become complete, decision 0020).
 */
export class MessageLastSeq1763800000020 implements MigrationInterface {
  readonly name = 'MessageLastSeq1763800000020';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE messages ADD COLUMN last_seq integer NOT NULL DEFAULT 0`);
    await queryRunner.query(`DELETE FROM projection_checkpoints WHERE name = 'block-read-models'`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE messages DROP COLUMN last_seq`);
  }
}
