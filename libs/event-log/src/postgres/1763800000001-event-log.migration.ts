import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The PostgreSQL event log. Positions are assigned by the single writer that holds the append
 * lock (see docs/decisions/0002-global-order-by-serialized-writer.md), so they are gap-free and
 * follow commit order; `event_log_head` holds the last committed one.
 */
export class EventLog1763800000001 implements MigrationInterface {
  readonly name = 'EventLog1763800000001';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE event_log_events (
        position        bigint      PRIMARY KEY,
        stream_id       text        NOT NULL,
        revision        bigint      NOT NULL,
        event_id        uuid        NOT NULL,
        type            text        NOT NULL,
        data            jsonb       NOT NULL,
        recorded_at     timestamptz NOT NULL,
        schema_version  integer     NOT NULL,
        correlation_id  text,
        causation_id    text,
        actor           text        NOT NULL,
        tenant          text        NOT NULL,
        prev_hash       text        NOT NULL,
        hash            text        NOT NULL,
        CONSTRAINT event_log_events_stream_revision_key UNIQUE (stream_id, revision),
        CONSTRAINT event_log_events_stream_event_id_key UNIQUE (stream_id, event_id)
      )`);
    await queryRunner.query(`
      CREATE TABLE event_log_streams (
        stream_id  text   PRIMARY KEY,
        revision   bigint NOT NULL,
        last_hash  text   NOT NULL
      )`);
    await queryRunner.query(`
      CREATE TABLE event_log_head (
        singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
        position   bigint  NOT NULL
      )`);
    await queryRunner.query(`INSERT INTO event_log_head (singleton, position) VALUES (true, 0)`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE event_log_head, event_log_streams, event_log_events`);
  }
}
