import type { MigrationInterface, QueryRunner } from 'typeorm';
import { COMPACT_APPEND_FUNCTION } from './1763800000250-compact-event-log.migration.js';

/**
 * `event_log_append` with each batch document sized for the planner (decision 0053). PostgreSQL takes
 * `jsonb_to_recordset` for a hundred rows, whatever the document holds: joined to `event_log_envelopes`
 * or `event_log_streams`, the batch's lookups read the whole table on every append once it held a
 * thousand rows or so, up to some twenty thousand, where a hundred index lookups cost less again. An
 * envelope is a session's (its correlation id): with 5,000 to 15,000 sessions a single append took 2.2
 * to 4.1 ms, against 0.8 to 0.9 by key, under the append lock. `LIMIT jsonb_array_length(…)` keeps every
 * row, and in a plan made for any call the planner takes it for ten rows. The function's statements are
 * always planned that way (`plan_cache_mode`): a plan made for the call's own values would take a batch
 * of a hundred entries or more for a hundred rows again. The planner then looks the batch's rows up by key
 * unless the table is small enough (a couple of thousand rows) that one scan costs less, and no statement
 * is planned again on each call.
 */
export class AppendLookupsByKey1763800000340 implements MigrationInterface {
  readonly name = 'AppendLookupsByKey1763800000340';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE OR REPLACE FUNCTION event_log_append(events jsonb, streams jsonb, envelopes jsonb, lock_key bigint, channel text)
      RETURNS bigint LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
      DECLARE
        head bigint;
        appended bigint;
      BEGIN
        PERFORM pg_advisory_xact_lock(lock_key);
        IF EXISTS (
          SELECT 1
            FROM (SELECT * FROM jsonb_to_recordset(streams) AS s(stream_id text, expected_revision bigint, expected_hash text)
                   LIMIT jsonb_array_length(streams)) s
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
          FROM (SELECT * FROM jsonb_to_recordset(envelopes) AS b(tenant text, actor text, correlation_id text)
                 LIMIT jsonb_array_length(envelopes)) b
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
                  FROM (SELECT * FROM jsonb_to_recordset(streams) AS b(n int, stream_id text)
                         LIMIT jsonb_array_length(streams)) b
                  JOIN event_log_streams stored USING (stream_id)) s ON s.n = r.stream
          JOIN (SELECT b.n, stored.envelope_key
                  FROM (SELECT * FROM jsonb_to_recordset(envelopes) AS b(n int, tenant text, actor text, correlation_id text)
                         LIMIT jsonb_array_length(envelopes)) b
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
      $$`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(COMPACT_APPEND_FUNCTION);
  }
}
