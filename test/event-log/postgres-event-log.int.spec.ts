import { createPostgresEventLog } from '#event-log';
import { eventLogContract } from '#event-log/testing';
import { createTestDatabase } from '../support/test-database.js';

eventLogContract(
  'PostgreSQL adapter',
  async () => {
    const database = await createTestDatabase();
    return {
      connect: () => createPostgresEventLog({ connectionString: database.connectionString, poolSize: 4 }),
      teardown: () => database.drop(),
    };
  },
  { refusedData: { text: 'jsonb has no NUL: \u0000' }, atomicMultiStream: true },
);
