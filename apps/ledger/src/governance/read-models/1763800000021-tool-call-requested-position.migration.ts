import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Tool calls are listed in the order they were requested in the log: the position of each call's
 * first event. The projection starts over from the log so existing rows get it.
 */
export class ToolCallRequestedPosition1763800000021 implements MigrationInterface {
  readonly name = 'ToolCallRequestedPosition1763800000021';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE tool_calls ADD COLUMN requested_position bigint NOT NULL DEFAULT 0`);
    await queryRunner.query(`DROP INDEX tool_calls_status_idx`);
    await queryRunner.query(`DROP INDEX tool_calls_session_idx`);
    await queryRunner.query(`CREATE INDEX tool_calls_status_idx ON tool_calls (tenant, status, requested_position)`);
    await queryRunner.query(
      `CREATE INDEX tool_calls_session_idx ON tool_calls (tenant, session_id, requested_position)`,
    );
    await queryRunner.query(`DELETE FROM projection_checkpoints WHERE name = 'tool-calls'`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX tool_calls_status_idx`);
    await queryRunner.query(`DROP INDEX tool_calls_session_idx`);
    await queryRunner.query(`ALTER TABLE tool_calls DROP COLUMN requested_position`);
    await queryRunner.query(`CREATE INDEX tool_calls_status_idx ON tool_calls (tenant, status, requested_at)`);
    await queryRunner.query(`CREATE INDEX tool_calls_session_idx ON tool_calls (tenant, session_id, requested_at)`);
  }
}
