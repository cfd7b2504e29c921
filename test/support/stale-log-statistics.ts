import { createPostgresEventLog, type EventLog } from '#event-log';
import pg from 'pg';
import { LOG_TABLES } from '../../libs/event-log/src/postgres/log-statistics.js';
import { createTestDatabase, type TestDatabase } from './test-database.js';

export interface LogWithStaleStatistics {
  readonly database: TestDatabase;
  /** A client of the test's own on the database. */
  readonly sql: pg.Client;
  readonly log: EventLog;
  /** Closes the log and the client, and drops the database. */
  close(): Promise<void>;
}

/**
 * A log on a fresh database whose log tables autovacuum leaves alone: their statistics stay those
 * of the migration's ANALYZE (empty) until something analyzes them, as after a bulk load or a
 * restore, before autovacuum comes round. The log checks them from `statisticsCheckDistance`.
 */
export async function logWithStaleStatistics(statisticsCheckDistance: number): Promise<LogWithStaleStatistics> {
  const database = await createTestDatabase();
  const sql = new pg.Client({ connectionString: database.connectionString });
  await sql.connect();
  for (const table of LOG_TABLES) await sql.query(`ALTER TABLE ${table} SET (autovacuum_enabled = false)`);
  const log = await createPostgresEventLog({ connectionString: database.connectionString, statisticsCheckDistance });
  return {
    database,
    sql,
    log,
    async close() {
      await log.close();
      await sql.end();
      await database.drop();
    },
  };
}

/** How many events the planner's statistics count in the log. */
export async function eventsCounted(sql: pg.Client): Promise<number> {
  const { rows } = await sql.query<{ events: number }>(
    `SELECT reltuples::float8 AS events FROM pg_class WHERE oid = 'event_log_events'::regclass`,
  );
  return rows[0].events;
}
