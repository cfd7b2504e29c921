import { createPostgresEventLog } from '#event-log';
import { eventLogContract } from '#event-log/testing';
import pg from 'pg';
import { createTestDatabase } from '../support/test-database.js';

eventLogContract(
  'PostgreSQL adapter',
  async () => {
    const database = await createTestDatabase();
    // Sessions in a zone far from UTC (+05:45): a read must still give back the UTC text the chain hash covers.
    const sql = new pg.Client({ connectionString: database.connectionString });
    await sql.connect();
    const { rows } = await sql.query<{ name: string }>('SELECT current_database() AS name');
    await sql.query(`ALTER DATABASE ${rows[0].name} SET TimeZone = 'Asia/Kathmandu'`);
    await sql.end();
    return {
      connect: () => createPostgresEventLog({ connectionString: database.connectionString, poolSize: 4 }),
      teardown: () => database.drop(),
    };
  },
  { refusedData: { text: 'jsonb has no NUL: \u0000' }, atomicMultiStream: true },
);
