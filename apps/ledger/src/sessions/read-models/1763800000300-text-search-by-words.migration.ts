import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A text block's search vector is written by the block projection, word by word while the block
 * streams (decision 0042), instead of being generated from the whole text at every update: a
 * streaming block is updated at each batch that extends it, and PostgreSQL tokenized all of its
 * text each time. `search_finished_chars` counts the code points whose words the vector holds as
 * finished (weight D); the words after them may still grow (weight A).
 *
 * Existing rows get the vector they had; a streaming block's words all count as unfinished, so its
 * next update tokenizes its finished words once and goes on from there.
 */
export class TextSearchByWords1763800000300 implements MigrationInterface {
  readonly name = 'TextSearchByWords1763800000300';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX message_blocks_search_idx`);
    await queryRunner.query(`ALTER TABLE message_blocks DROP COLUMN search`);
    await queryRunner.query(`
      ALTER TABLE message_blocks
        ADD COLUMN search tsvector NOT NULL DEFAULT '',
        ADD COLUMN search_finished_chars integer NOT NULL DEFAULT 0`);
    await queryRunner.query(`
      UPDATE message_blocks SET
        search = CASE WHEN status = 'streaming'
          THEN setweight(to_tsvector('simple', left(content #>> '{}', 65536)), 'A')
          ELSE to_tsvector('simple', left(content #>> '{}', 65536)) END,
        search_finished_chars = CASE WHEN status = 'streaming' THEN 0 ELSE char_length(left(content #>> '{}', 65536)) END
      WHERE type = 'main_text' AND jsonb_typeof(content) = 'string'`);
    await queryRunner.query(`CREATE INDEX message_blocks_search_idx ON message_blocks USING gin (search)`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE message_blocks DROP COLUMN search, DROP COLUMN search_finished_chars`);
    await queryRunner.query(`
      ALTER TABLE message_blocks ADD COLUMN search tsvector GENERATED ALWAYS AS (
        to_tsvector('simple', CASE WHEN type = 'main_text' THEN left(content #>> '{}', 65536) ELSE '' END)
      ) STORED`);
    await queryRunner.query(`CREATE INDEX message_blocks_search_idx ON message_blocks USING gin (search)`);
  }
}
