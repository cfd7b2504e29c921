import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A text block's search vector is written by the block projection, word by word while the block
 * streams (decision 0042), instead of being generated from the whole text at every update: a
 * streaming block is updated at each batch that extends it, and PostgreSQL tokenized all of its
 * text each time. `search_finished_chars` counts, while a block streams, the code points whose words
 * the vector holds as finished (weight D); the text after them may still grow (weight A).
 *
 * The column keeps its values and its index (no rewrite). A streaming block's words all become
 * unfinished, so its next write tokenizes its finished words once and goes on from there; a block
 * that no longer streams is written whole, and its `search_finished_chars` is not read. No default:
 * a writer that leaves the vector out fails instead of hiding a block from search.
 */
export class TextSearchByWords1763800000300 implements MigrationInterface {
  readonly name = 'TextSearchByWords1763800000300';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE message_blocks ALTER COLUMN search DROP EXPRESSION`);
    // A text block with no content had no vector.
    await queryRunner.query(`UPDATE message_blocks SET search = '' WHERE search IS NULL`);
    await queryRunner.query(`
      ALTER TABLE message_blocks
        ALTER COLUMN search SET NOT NULL,
        ADD COLUMN search_finished_chars integer NOT NULL DEFAULT 0`);
    await queryRunner.query(`
      UPDATE message_blocks SET search = setweight(search, 'A') WHERE type = 'main_text' AND status = 'streaming'`);
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
