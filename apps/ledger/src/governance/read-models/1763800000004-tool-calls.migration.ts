import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Governance: the `tool_calls` read model (the approval queue and the audit view of every call,
 * rebuilt from `toolcall-*` streams), and the saga's own store of calls it has not finished,
 * written with its checkpoint so a restart knows what to resume.
 */
export class ToolCalls1763800000004 implements MigrationInterface {
  readonly name = 'ToolCalls1763800000004';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE tool_calls (
        id text PRIMARY KEY,
        session_id text NOT NULL,
        message_id text NOT NULL,
        tool_id text NOT NULL,
        server text NOT NULL,
        tool_name text NOT NULL,
        arguments jsonb,
        arguments_sha256 text NOT NULL,
        requested_by text NOT NULL,
        status text NOT NULL,
        outcome text,
        firewall jsonb,
        guardian jsonb,
        approval jsonb,
        decision jsonb,
        execution jsonb,
        requested_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL,
        position bigint NOT NULL
      )`);
    await queryRunner.query(`CREATE INDEX tool_calls_status_idx ON tool_calls (status, requested_at)`);
    await queryRunner.query(`CREATE INDEX tool_calls_session_idx ON tool_calls (session_id, requested_at)`);
    await queryRunner.query(
      `CREATE TABLE governance_saga_open (tool_call_id text PRIMARY KEY, request jsonb NOT NULL, opened_at timestamptz NOT NULL DEFAULT now())`,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE governance_saga_open`);
    await queryRunner.query(`DROP TABLE tool_calls`);
    await queryRunner.query(`DELETE FROM projection_checkpoints WHERE name IN ('tool-calls', 'governance-saga')`);
  }
}
