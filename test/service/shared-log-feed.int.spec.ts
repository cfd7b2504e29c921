import { createPostgresEventLog } from '#event-log';
import { eventLogContract } from '#event-log/testing';
import { withSharedLogFeed } from '../../apps/ledger/src/event-log/shared-log-feed.js';
import { createTestDatabase } from '../support/test-database.js';

// The service's consumers subscribe through the shared feed: it must keep every promise of the port
// (the contract's subscribers start at the head, midway and far behind its window).
eventLogContract(
  'PostgreSQL adapter behind the shared log feed',
  async () => {
    const database = await createTestDatabase();
    return {
      connect: async () =>
        withSharedLogFeed(
          await createPostgresEventLog({ connectionString: database.connectionString, poolSize: 4 }),
          // Nothing fails here on purpose: an error of the shared read must fail the run, not be retried quietly.
          (error) => {
            throw error;
          },
        ),
      teardown: () => database.drop(),
    };
  },
  { refusedData: { text: 'jsonb has no NUL: \u0000' }, atomicMultiStream: true },
);
