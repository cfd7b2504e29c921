import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `event_log_append` as this migration made it. Migration 1763800000340 replaced it and goes back to
 * it when undone.
 */
export const COMPACT_APPEND_FUNCTION = `
      CREATE OR REPLACE FUNCTION event_log_append(events jsonb, streams jsonb, envelopes jsonb, lock_key bigint, channel text)
      RETURNS bigint LANGUAGE plpgsql AS $$
      DECLARE
        head bigint;
        appended bigint;
      BEGIN
        PERFORM pg_advisory_xact_lock(lock_key);
        IF EXISTS (
          SELECT 1
            FROM jsonb_to_recordset(streams) AS s(stream_id text, expected_revision bigint, expected_hash text)
            LEFT JOIN event_log_streams stored USING (stream_id)
           WHERE stored.revision IS DISTINCT FROM s.expected_revision
              OR stored.last_hash IS DISTINCT FROM decode(s.expected_hash, 'hex')) THEN
          RETURN NULL;
        END IF;
        SELECT position INTO head FROM event_log_head;
        INSERT INTO event_log_streams (stream_id, revision, last_hash)
        SELECT s.stream_id, s.revision, decode(s.last_hash, 'hex')
          FROM jsonb_to_recordset(streams) AS s(stream_id text, revision bigint, last_hash text)
        ON CONFLICT (stream_id) DO UPDATE SET revision = excluded.revision, last_hash = excluded.last_hash;
        INSERT INTO event_log_envelopes (tenant, actor, correlation_id)
        SELECT b.tenant, b.actor, b.correlation_id
          FROM jsonb_to_recordset(envelopes) AS b(tenant text, actor text, correlation_id text)
         WHERE NOT EXISTS (
           SELECT 1 FROM event_log_envelopes v
            WHERE v.tenant = b.tenant AND v.actor = b.actor AND (v.correlation_id IS NULL) = (b.correlation_id IS NULL)
              AND coalesce(v.correlation_id, '') = coalesce(b.correlation_id, ''));
        INSERT INTO event_log_events
          (position, stream_key, revision, recorded_at, event_id, envelope_key, schema_version, type, causation_id,
           prev_hash, hash, data)
        SELECT head + r.ordinal, s.stream_key, r.revision, r.recorded_at, r.event_id, v.envelope_key, r.schema_version,
               r.type, r.causation_id, decode(r.prev_hash, 'hex'), decode(r.hash, 'hex'), r.data
          FROM jsonb_to_recordset(events) AS r(ordinal bigint, stream int, envelope int, revision bigint,
               event_id uuid, type text, data jsonb, recorded_at timestamptz, schema_version int, causation_id text,
               prev_hash text, hash text)
          JOIN (SELECT b.n, stored.stream_key
                  FROM jsonb_to_recordset(streams) AS b(n int, stream_id text)
                  JOIN event_log_streams stored USING (stream_id)) s ON s.n = r.stream
          JOIN (SELECT b.n, stored.envelope_key
                  FROM jsonb_to_recordset(envelopes) AS b(n int, tenant text, actor text, correlation_id text)
                  JOIN event_log_envelopes stored ON stored.tenant = b.tenant AND stored.actor = b.actor
                   AND (stored.correlation_id IS NULL) = (b.correlation_id IS NULL)
                   AND coalesce(stored.correlation_id, '') = coalesce(b.correlation_id, '')) v ON v.n = r.envelope;
        GET DIAGNOSTICS appended = ROW_COUNT;
        IF appended <> jsonb_array_length(events) THEN
          RAISE EXCEPTION 'event_log_append stored % of % events', appended, jsonb_array_length(events);
        END IF;
        UPDATE event_log_head SET position = head + appended;
        PERFORM pg_notify(channel, (head + appended)::text);
        RETURN head;
      END
      $$`;

/**
 * A compact event row (issue 15, decision 0025): each stream id and each envelope (tenant, actor,
 * correlation id) is stored once, in `event_log_streams` and `event_log_envelopes`, and a row
 * points at them by number; hashes are 32 bytes, not 64 characters. Existing rows are converted.
 * `event_log_records` gives rows back exactly as before (the fields the chain hash covers, hashes
 * in hex, plus `stream_key`): every read goes through it.
 *
 * Keys are per stream as before: an event id is unique within its stream only, so an id a client
 * picks can never collide with another tenant's event. No foreign keys: `event_log_append` is the
 * only writer and creates a stream or envelope before the first row naming it.
 */
export class CompactEventLog1763800000250 implements MigrationInterface {
  readonly name = 'CompactEventLog1763800000250';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE event_log_streams
        ADD COLUMN stream_key bigint GENERATED ALWAYS AS IDENTITY,
        ALTER COLUMN last_hash TYPE bytea USING decode(last_hash, 'hex')`);
    await queryRunner.query(
      `ALTER TABLE event_log_streams ADD CONSTRAINT event_log_streams_stream_key_key UNIQUE (stream_key)`,
    );
    // A null correlation id and an empty one are different envelopes: the index keys on both.
    await queryRunner.query(`
      CREATE TABLE event_log_envelopes (
        envelope_key    integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        tenant          text    NOT NULL,
        actor           text    NOT NULL,
        correlation_id  text
      )`);
    await queryRunner.query(`
      CREATE UNIQUE INDEX event_log_envelopes_fields_key
        ON event_log_envelopes (tenant, actor, (correlation_id IS NULL), (coalesce(correlation_id, '')))`);
    await queryRunner.query(`
      INSERT INTO event_log_envelopes (tenant, actor, correlation_id)
      SELECT DISTINCT tenant, actor, correlation_id FROM event_log_events`);
    // Fixed-width columns first, widest first, so that no row carries alignment padding.
    await queryRunner.query(`
      CREATE TABLE event_log_compact_events (
        position        bigint      NOT NULL,
        stream_key      bigint      NOT NULL,
        revision        bigint      NOT NULL,
        recorded_at     timestamptz NOT NULL,
        event_id        uuid        NOT NULL,
        envelope_key    integer     NOT NULL,
        schema_version  integer     NOT NULL,
        type            text        NOT NULL,
        causation_id    text,
        prev_hash       bytea       NOT NULL,
        hash            bytea       NOT NULL,
        data            jsonb       NOT NULL
      )`);
    await queryRunner.query(`
      INSERT INTO event_log_compact_events
      SELECT e.position, s.stream_key, e.revision, e.recorded_at, e.event_id, v.envelope_key, e.schema_version, e.type,
             e.causation_id, decode(e.prev_hash, 'hex'), decode(e.hash, 'hex'), e.data
        FROM event_log_events e
        JOIN event_log_streams s USING (stream_id)
        JOIN event_log_envelopes v ON v.tenant = e.tenant AND v.actor = e.actor
         AND (v.correlation_id IS NULL) = (e.correlation_id IS NULL)
         AND coalesce(v.correlation_id, '') = coalesce(e.correlation_id, '')
       ORDER BY e.position`);
    await queryRunner.query(`DROP TABLE event_log_events`);
    await queryRunner.query(`ALTER TABLE event_log_compact_events RENAME TO event_log_events`);
    await queryRunner.query(`
      ALTER TABLE event_log_events
        ADD CONSTRAINT event_log_events_pkey PRIMARY KEY (position),
        ADD CONSTRAINT event_log_events_stream_revision_key UNIQUE (stream_key, revision),
        ADD CONSTRAINT event_log_events_stream_event_id_key UNIQUE (stream_key, event_id)`);
    // Each lookup is its own subquery (OFFSET 0 keeps the planner from merging it into a join),
    // so a read walks the log in position order, looks up only the rows it returns (memoized:
    // a page touches few streams), and stops at its LIMIT.
    await queryRunner.query(`
      CREATE VIEW event_log_records AS
      SELECT e.position, s.stream_id, e.revision, e.event_id, e.type, e.data, e.recorded_at, e.schema_version,
             v.correlation_id, e.causation_id, v.actor, v.tenant,
             encode(e.prev_hash, 'hex') AS prev_hash, encode(e.hash, 'hex') AS hash, e.stream_key
        FROM event_log_events e
       CROSS JOIN LATERAL (SELECT stream_id FROM event_log_streams WHERE stream_key = e.stream_key OFFSET 0) s
       CROSS JOIN LATERAL (
         SELECT tenant, actor, correlation_id FROM event_log_envelopes
          WHERE envelope_key = e.envelope_key OFFSET 0) v`);
    await queryRunner.query(`ANALYZE event_log_events, event_log_streams, event_log_envelopes`);
    await queryRunner.query(`DROP FUNCTION event_log_append(jsonb, jsonb, bigint, text)`);
    // The batch travels as three JSON documents: its streams and its distinct envelopes, each
    // entry numbered `n`, and its events, which name their stream and envelope by that number.
    // Each event's row then finds its keys in two tiny joins, and the events document carries
    // no stream id, tenant, actor or correlation id.
    await queryRunner.query(COMPACT_APPEND_FUNCTION);
  }

  async down(): Promise<void> {
    throw new Error('the compact event log is not converted back');
  }
}
