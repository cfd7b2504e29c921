import pg from 'pg';
import { createTestDatabase, type TestDatabase } from './test-database.js';

/**
 * A fresh database whose log tables autovacuum leaves alone, with a client on it: their statistics
 * stay those of the migration's ANALYZE (empty) until something analyzes them, as after a bulk load
 * or a restore, before autovacuum comes round.
 */
export async function databaseWithStaleLogStatistics(): Promise<{ database: TestDatabase; sql: pg.Client }> {
  const database = await createTestDatabase();
  const sql = new pg.Client({ connectionString: database.connectionString });
  await sql.connect();
  for (const table of ['event_log_events', 'event_log_streams', 'event_log_envelopes'])
    await sql.query(`ALTER TABLE ${table} SET (autovacuum_enabled = false)`);
  return { database, sql };
}

/** How many events the planner's statistics count in the log. */
export async function eventsCounted(sql: pg.Client): Promise<number> {
  const { rows } = await sql.query<{ events: number }>(
    `SELECT reltuples::float8 AS events FROM pg_class WHERE oid = 'event_log_events'::regclass`,
  );
  return rows[0].events;
}
