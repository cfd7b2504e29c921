import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * An append in one round trip (issue 15): `event_log_append` takes the append lock, checks that
 * every stream of the group stands where the writer planned it (revision and last hash), and
 * only then numbers, inserts and announces the events. Inside a function each statement takes a
 * fresh snapshot, so the checks after the lock see every commit made before it; a single plain
 * statement could not (its snapshot predates the lock wait).
 *
 * Returns the log head the events were numbered after (event `ordinal` n lands at head + n), or
 * NULL, storing nothing, when a stream was not where the writer thought: the writer then reads
 * the truth under the lock and plans again. An event id the stream already holds fails the
 * unique key, which the writer treats the same way.
 */
export class AppendFunction1763800000150 implements MigrationInterface {
  readonly name = 'AppendFunction1763800000150';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE FUNCTION event_log_append(events jsonb, streams jsonb, lock_key bigint, channel text) RETURNS bigint
      LANGUAGE plpgsql AS $$
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
              OR stored.last_hash IS DISTINCT FROM s.expected_hash) THEN
          RETURN NULL;
        END IF;
        SELECT position INTO head FROM event_log_head;
        INSERT INTO event_log_events
          (position, stream_id, revision, event_id, type, data, recorded_at, schema_version, correlation_id,
           causation_id, actor, tenant, prev_hash, hash)
        SELECT head + r.ordinal, r.stream_id, r.revision, r.event_id, r.type, r.data, r.recorded_at, r.schema_version,
               r.correlation_id, r.causation_id, r.actor, r.tenant, r.prev_hash, r.hash
          FROM jsonb_to_recordset(events) AS r(ordinal bigint, stream_id text, revision bigint, event_id uuid, type text,
               data jsonb, recorded_at timestamptz, schema_version int, correlation_id text, causation_id text,
               actor text, tenant text, prev_hash text, hash text);
        GET DIAGNOSTICS appended = ROW_COUNT;
        INSERT INTO event_log_streams (stream_id, revision, last_hash)
        SELECT s.stream_id, s.revision, s.last_hash
          FROM jsonb_to_recordset(streams) AS s(stream_id text, revision bigint, last_hash text)
        ON CONFLICT (stream_id) DO UPDATE SET revision = excluded.revision, last_hash = excluded.last_hash;
        UPDATE event_log_head SET position = head + appended;
        PERFORM pg_notify(channel, (head + appended)::text);
        RETURN head;
      END
      $$`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP FUNCTION event_log_append(jsonb, jsonb, bigint, text)`);
  }
}
