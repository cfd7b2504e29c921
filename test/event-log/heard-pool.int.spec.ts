import { heardPool } from '#event-log';
import pg from 'pg';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

describe('heardPool', () => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createTestDatabase();
  });
  afterAll(() => database.drop());

  // Unheard, either connection's error is thrown from an event emitter: the test's process fails.
  it('hears a connection the server ends, idle in the pool or checked out, and goes on with a new one', async () => {
    const heard: string[] = [];
    const pool = heardPool({ connectionString: database.connectionString, max: 2 }, (error) =>
      heard.push(error.message),
    );
    const admin = new pg.Client({ connectionString: database.connectionString });
    await admin.connect();
    const checkedOut = await pool.connect();
    try {
      const pidOf = async (runner: pg.Pool | pg.PoolClient) =>
        (await runner.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid;
      const held = await pidOf(checkedOut);
      const idle = await pidOf(pool);
      expect(idle).not.toBe(held);
      await admin.query('SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid', [[held, idle]]);
      for (let waited = 0; heard.length < 2 && waited < 5_000; waited += 20)
        await new Promise((resolve) => setTimeout(resolve, 20));
      await new Promise((resolve) => setTimeout(resolve, 100));
      // The server's word once for each (the pool's own event for the idle one is the same error); the checked-out
      // one then also tells its end.
      expect(heard.filter((message) => /terminating connection/.test(message))).toHaveLength(2);
      expect(heard.filter((message) => !/terminating connection|terminated unexpectedly/.test(message))).toEqual([]);
      // The pool answers on a new connection.
      expect([held, idle]).not.toContain(await pidOf(pool));
    } finally {
      checkedOut.release(true);
      await admin.end();
      await pool.end();
    }
  });
});
