import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Identity: API keys (salted hashes, never secrets), and the tenant on every read-model row. Rows
 * are keyed by tenant, because tenants choose their own ids. The tenant columns can only be
 * filled by folding the log again, so the read models start over.
 */
export class Identity1763800000005 implements MigrationInterface {
  readonly name = 'Identity1763800000005';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE api_keys (
        id            text        PRIMARY KEY,
        name          text        NOT NULL,
        tenant        text        NOT NULL,
        roles         text[]      NOT NULL,
        subject       text,
        expires_at    timestamptz,
        salt          bytea       NOT NULL,
        secret_hash   bytea       NOT NULL,
        suffix        text        NOT NULL,
        created_by    text        NOT NULL,
        created_at    timestamptz NOT NULL DEFAULT now(),
        revoked_at    timestamptz,
        revoked_by    text,
        last_used_at  timestamptz
      )`);
    await queryRunner.query(`CREATE INDEX api_keys_tenant_idx ON api_keys (tenant, created_at)`);
    await queryRunner.query(`TRUNCATE sessions, messages, message_blocks, tool_calls`);
    await queryRunner.query(`DELETE FROM projection_checkpoints WHERE name IN ('block-read-models', 'tool-calls')`);
    for (const table of ['sessions', 'messages', 'message_blocks', 'tool_calls']) {
      await queryRunner.query(`ALTER TABLE ${table} ADD COLUMN tenant text NOT NULL`);
    }
    await queryRunner.query(`ALTER TABLE sessions DROP CONSTRAINT sessions_pkey, ADD PRIMARY KEY (tenant, id)`);
    await queryRunner.query(
      `ALTER TABLE messages DROP CONSTRAINT messages_pkey, ADD PRIMARY KEY (tenant, session_id, id)`,
    );
    await queryRunner.query(
      `ALTER TABLE message_blocks DROP CONSTRAINT message_blocks_pkey, ADD PRIMARY KEY (tenant, session_id, id)`,
    );
    await queryRunner.query(`DROP INDEX messages_session_ordinal_idx, message_blocks_message_index_idx`);
    await queryRunner.query(`CREATE INDEX messages_session_ordinal_idx ON messages (tenant, session_id, ordinal)`);
    await queryRunner.query(
      `CREATE INDEX message_blocks_message_index_idx ON message_blocks (tenant, session_id, message_id, index)`,
    );
    await queryRunner.query(`ALTER TABLE tool_calls DROP CONSTRAINT tool_calls_pkey, ADD PRIMARY KEY (tenant, id)`);
    await queryRunner.query(`DROP INDEX tool_calls_status_idx, tool_calls_session_idx`);
    await queryRunner.query(`CREATE INDEX tool_calls_status_idx ON tool_calls (tenant, status, requested_at)`);
    await queryRunner.query(`CREATE INDEX tool_calls_session_idx ON tool_calls (tenant, session_id, requested_at)`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE api_keys`);
    await queryRunner.query(`TRUNCATE sessions, messages, message_blocks, tool_calls`);
    await queryRunner.query(`DELETE FROM projection_checkpoints WHERE name IN ('block-read-models', 'tool-calls')`);
    await queryRunner.query(`ALTER TABLE sessions DROP CONSTRAINT sessions_pkey, ADD PRIMARY KEY (id)`);
    await queryRunner.query(`ALTER TABLE messages DROP CONSTRAINT messages_pkey, ADD PRIMARY KEY (session_id, id)`);
    await queryRunner.query(
      `ALTER TABLE message_blocks DROP CONSTRAINT message_blocks_pkey, ADD PRIMARY KEY (session_id, id)`,
    );
    await queryRunner.query(`ALTER TABLE tool_calls DROP CONSTRAINT tool_calls_pkey, ADD PRIMARY KEY (id)`);
    for (const table of ['sessions', 'messages', 'message_blocks', 'tool_calls'])
      await queryRunner.query(`ALTER TABLE ${table} DROP COLUMN tenant`);
  }
}
