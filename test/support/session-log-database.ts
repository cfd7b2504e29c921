import { DEFAULT_SESSION_QUOTA } from '#core';
import { createPostgresEventLog, type EventLog } from '#event-log';
import pg from 'pg';
import { SessionRepository } from '../../apps/ledger/src/sessions/session-repository.js';
import { createTestDatabase, type TestDatabase } from './test-database.js';

/** A fresh database with its event log, a session repository over it, and a pool for projection writes. */
export interface SessionLogDatabase {
  readonly database: TestDatabase;
  readonly log: EventLog;
  readonly repository: SessionRepository;
  /** Two connections: a rebuild holds one for its lock and writes on the other. */
  readonly pool: pg.Pool;
  close(): Promise<void>;
}

export async function sessionLogDatabase(): Promise<SessionLogDatabase> {
  const database = await createTestDatabase();
  const log = await createPostgresEventLog({ connectionString: database.connectionString, poolSize: 2 });
  const pool = new pg.Pool({ connectionString: database.connectionString, max: 2 });
  return {
    database,
    log,
    repository: new SessionRepository(log, DEFAULT_SESSION_QUOTA),
    pool,
    async close() {
      await pool.end();
      await log.close();
      await database.drop();
    },
  };
}
