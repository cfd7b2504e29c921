import pg from 'pg';
import { runMigrations } from '../../apps/ledger/src/database/migrations.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

describe('runMigrations', () => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createTestDatabase();
  });
  afterAll(() => database.drop());

  it('fails, without crashing, when the server ends its lock’s connection while the migrations run', async () => {
    const blocker = new pg.Client({ connectionString: database.connectionString });
    // Asked outside the blocker's transaction: inside one, pg_stat_activity is the snapshot of its first read.
    const admin = new pg.Client({ connectionString: database.connectionString });
    await Promise.all([blocker.connect(), admin.connect()]);
    try {
      // Holds TypeORM's run at its first look at the migrations table, the lock's connection idle meanwhile.
      await blocker.query('BEGIN; LOCK TABLE migrations IN ACCESS EXCLUSIVE MODE');
      const run = runMigrations(database.connectionString).then(
        () => 'migrated',
        (error: Error) => error.message,
      );
      const lockHolder = async () =>
        (
          await admin.query<{ pid: number }>(
            `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND state = 'idle'
               AND query LIKE 'SELECT pg_advisory_lock%'`,
          )
        ).rows[0]?.pid;
      let ended: string | undefined;
      void run.then((outcome) => (ended = outcome));
      let pid: number | undefined;
      for (let waited = 0; pid === undefined && ended === undefined && waited < 30_000; waited += 20) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        pid = await lockHolder();
      }
      expect({ ended, found: pid !== undefined }).toEqual({ ended: undefined, found: true });
      await admin.query('SELECT pg_terminate_backend($1)', [pid]);
      await new Promise((resolve) => setTimeout(resolve, 100));
      await blocker.query('ROLLBACK');
      expect(await run).toMatch(/^the migrations' lock was lost while they ran: terminating connection/);
    } finally {
      await Promise.all([blocker.end(), admin.end()]);
    }
  });
});
