import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Finding sessions (decision 0021): each session's summary (message count, model, status,
 * errors, token usage, last activity) kept by the projection, a keyset index in list order, and
 * full-text search. The tsvectors are generated columns over what the projection writes (a
 * rebuild's table copies carry them), `simple` configuration, each source cut to 65,536
 * characters so no row can outgrow a tsvector (1 MB) and stop the projection. The new columns
 * can only be filled by folding the log again, so the read models start over.
 */
export class SessionList1763800000022 implements MigrationInterface {
  readonly name = 'SessionList1763800000022';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`TRUNCATE sessions, messages, message_blocks`);
    await queryRunner.query(`DELETE FROM projection_checkpoints WHERE name = 'block-read-models'`);
    await queryRunner.query(`
      ALTER TABLE sessions
        ADD COLUMN model             text,
        ADD COLUMN status            text        NOT NULL,
        ADD COLUMN has_errors        boolean     NOT NULL,
        ADD COLUMN message_count     integer     NOT NULL,
        ADD COLUMN prompt_tokens     bigint      NOT NULL,
        ADD COLUMN completion_tokens bigint      NOT NULL,
        ADD COLUMN total_tokens      bigint      NOT NULL,
        ADD COLUMN last_activity_at  timestamptz NOT NULL,
        ADD COLUMN search tsvector GENERATED ALWAYS AS (
          to_tsvector('simple', left(coalesce(title, ''), 65536)) ||
          to_tsvector('simple', left(
            jsonb_path_query_array(metadata, 'strict $.** ? (@.type() == "string" || @.type() == "number")')::text,
            65536))
        ) STORED`);
    await queryRunner.query(
      `CREATE INDEX sessions_last_activity_idx ON sessions (tenant, last_activity_at DESC, id DESC)`,
    );
    await queryRunner.query(`CREATE INDEX sessions_search_idx ON sessions USING gin (search)`);
    await queryRunner.query(`
      ALTER TABLE messages ADD COLUMN search tsvector GENERATED ALWAYS AS (
        to_tsvector('simple', left(coalesce(content, ''), 65536))
      ) STORED`);
    await queryRunner.query(`CREATE INDEX messages_search_idx ON messages USING gin (search)`);
    await queryRunner.query(`
      ALTER TABLE message_blocks ADD COLUMN search tsvector GENERATED ALWAYS AS (
        to_tsvector('simple', CASE WHEN type = 'main_text' THEN left(content #>> '{}', 65536) ELSE '' END)
      ) STORED`);
    await queryRunner.query(`CREATE INDEX message_blocks_search_idx ON message_blocks USING gin (search)`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE message_blocks DROP COLUMN search`);
    await queryRunner.query(`ALTER TABLE messages DROP COLUMN search`);
    await queryRunner.query(`
      ALTER TABLE sessions DROP COLUMN search, DROP COLUMN last_activity_at, DROP COLUMN total_tokens,
        DROP COLUMN completion_tokens, DROP COLUMN prompt_tokens, DROP COLUMN message_count,
        DROP COLUMN has_errors, DROP COLUMN status, DROP COLUMN model`);
  }
}
