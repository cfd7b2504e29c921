import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A text block's search vector is stored once the block stops streaming (decision 0042). PostgreSQL
 * computes a stored generated column again on every update, and a streaming block is updated at
 * every batch that extends it: its whole text was tokenized again each time, quadratic in its
 * length. Blocks still streaming are found by search from their text at query time instead, through
 * a partial index of them (`SessionList`), so search finds the same sessions as before.
 */
export class StreamingTextSearch1763800000300 implements MigrationInterface {
  readonly name = 'StreamingTextSearch1763800000300';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE message_blocks DROP COLUMN search`);
    await queryRunner.query(`
      ALTER TABLE message_blocks ADD COLUMN search tsvector GENERATED ALWAYS AS (
        to_tsvector('simple',
          CASE WHEN type = 'main_text' AND status <> 'streaming' THEN left(content #>> '{}', 65536) ELSE '' END)
      ) STORED`);
    await queryRunner.query(`CREATE INDEX message_blocks_search_idx ON message_blocks USING gin (search)`);
    await queryRunner.query(`
      CREATE INDEX message_blocks_streaming_text_idx ON message_blocks (tenant)
       WHERE type = 'main_text' AND status = 'streaming'`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX message_blocks_streaming_text_idx`);
    await queryRunner.query(`ALTER TABLE message_blocks DROP COLUMN search`);
    await queryRunner.query(`
      ALTER TABLE message_blocks ADD COLUMN search tsvector GENERATED ALWAYS AS (
        to_tsvector('simple', CASE WHEN type = 'main_text' THEN left(content #>> '{}', 65536) ELSE '' END)
      ) STORED`);
    await queryRunner.query(`CREATE INDEX message_blocks_search_idx ON message_blocks USING gin (search)`);
  }
}
