import { randomUUID } from 'node:crypto';
import { createPostgresEventLog, NO_STREAM, type EventLog } from '#event-log';
import { eventLogContract } from '#event-log/testing';
import { withSharedLogFeed } from '../../apps/ledger/src/event-log/shared-log-feed.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

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

describe('PostgreSQL adapter behind the shared log feed, after a commit', () => {
  let database: TestDatabase;
  let log: EventLog;
  beforeAll(async () => {
    database = await createTestDatabase();
    const adapter = await createPostgresEventLog({ connectionString: database.connectionString });
    log = withSharedLogFeed(adapter, (error) => {
      throw error;
    });
  });
  afterAll(async () => {
    await log?.close();
    await database?.drop();
  });

  // An HTTP answer is many promise steps after its append resolves: it must not wait for every consumer's work.
  it('lets the appender go on, many promise steps, before a consumer takes the events', async () => {
    const order: string[] = [];
    const subscription = log.subscribeToAll({ fromPosition: await log.headPosition() });
    let following!: () => void;
    const followed = new Promise<void>((resolve) => (following = resolve));
    const consuming = (async () => {
      for await (const batch of subscription) {
        following();
        if (batch.events.length > 0) return order.push('consumer');
      }
    })();
    await followed;
    await log.append(`order-${randomUUID()}`, [{ id: randomUUID(), type: 'test.order', data: {} }], NO_STREAM);
    for (let step = 0; step < 100; step += 1) await Promise.resolve();
    order.push('appender');
    await consuming;
    await subscription.close();
    expect(order).toEqual(['appender', 'consumer']);
  });
});
