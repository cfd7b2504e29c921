import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
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

/**
 * The built feed and PostgreSQL adapter in a process of its own, which the test can kill: a subscription left
 * open when its feed closed used to spin on promise callbacks for ever, and no timer of this process would fire.
 */
const CLOSED_UNDER_A_SUBSCRIPTION = `
  const { createPostgresEventLog } = await import(process.env.EVENT_LOG_MODULE);
  const { withSharedLogFeed } = await import(process.env.FEED_MODULE);
  const adapter = await createPostgresEventLog({ connectionString: process.env.DATABASE_URL });
  const log = withSharedLogFeed(adapter, (error) => { throw error; });
  const iterator = log.subscribeToAll({ fromPosition: await log.headPosition() })[Symbol.asyncIterator]();
  await iterator.next();
  const after = iterator.next();
  await log.close();
  console.log(JSON.stringify(await after));
`;

describe('the shared log feed closed under an open subscription', () => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createTestDatabase();
  });
  afterAll(() => database?.drop());

  it('ends the subscription, and the process goes on', async () => {
    const built = (file: string) => pathToFileURL(path.resolve('dist', file)).href;
    const env = {
      ...process.env,
      DATABASE_URL: database.connectionString,
      EVENT_LOG_MODULE: built('libs/event-log/src/index.js'),
      FEED_MODULE: built('apps/ledger/src/event-log/shared-log-feed.js'),
    };
    const ran = await new Promise<{ stdout: string; killed: boolean }>((resolve) =>
      execFile(
        process.execPath,
        ['--input-type=module', '--eval', CLOSED_UNDER_A_SUBSCRIPTION],
        { env, timeout: 15_000 },
        (error, stdout) => resolve({ stdout: stdout.trim(), killed: error?.killed ?? false }),
      ),
    );
    expect(ran).toEqual({ stdout: JSON.stringify({ done: true }), killed: false });
  }, 30_000);
});
