import type { MigrationInterface, QueryRunner } from 'typeorm';

/** Read models of sessions, messages and blocks, and the checkpoints of the projections that fill them. */
export class BlockReadModels1763800000002 implements MigrationInterface {
  readonly name = 'BlockReadModels1763800000002';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE projection_checkpoints (
        name        text        PRIMARY KEY,
        position    bigint      NOT NULL,
        updated_at  timestamptz NOT NULL DEFAULT now()
      )`);
    await queryRunner.query(`
      CREATE TABLE sessions (
        id          text        PRIMARY KEY,
        title       text,
        metadata    jsonb       NOT NULL,
        created_at  timestamptz NOT NULL,
        position    bigint      NOT NULL
      )`);
    await queryRunner.query(`
      CREATE TABLE messages (
        id          text        PRIMARY KEY,
        session_id  text        NOT NULL,
        ordinal     integer     NOT NULL,
        role        text        NOT NULL,
        parent_id   text,
        model       text,
        content     text,
        status      text        NOT NULL,
        created_at  timestamptz NOT NULL,
        position    bigint      NOT NULL
      )`);
    await queryRunner.query(`CREATE INDEX messages_session_ordinal_idx ON messages (session_id, ordinal)`);
    await queryRunner.query(`
      CREATE TABLE message_blocks (
        id             text        PRIMARY KEY,
        message_id     text        NOT NULL,
        session_id     text        NOT NULL,
        index          integer     NOT NULL,
        type           text        NOT NULL,
        status         text        NOT NULL,
        content        jsonb,
        tool_id        text,
        tool_name      text,
        arguments      jsonb,
        tool_response  jsonb,
        metadata       jsonb,
        error          jsonb,
        extra          jsonb       NOT NULL,
        created_at     timestamptz NOT NULL,
        updated_at     timestamptz,
        position       bigint      NOT NULL
      )`);
    await queryRunner.query(`CREATE INDEX message_blocks_message_index_idx ON message_blocks (message_id, index)`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE message_blocks, messages, sessions, projection_checkpoints`);
  }
}
