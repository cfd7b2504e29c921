import { randomUUID } from 'node:crypto';
import { createPostgresEventLog, NO_STREAM, type EventLog } from '#event-log';
import pg from 'pg';
import { eventsCounted, logWithStaleStatistics, type LogWithStaleStatistics } from '../support/stale-log-statistics.js';

const EVENTS = 2_000;

/** A log appended to since its tables were last analyzed (`logWithStaleStatistics`). */
describe('the PostgreSQL log keeps its statistics from lagging far behind it', () => {
  let stale: LogWithStaleStatistics;
  let database: LogWithStaleStatistics['database'];
  let sql: pg.Client;
  let log: EventLog;
  beforeAll(async () => {
    stale = await logWithStaleStatistics(500);
    ({ database, sql, log } = stale);
    for (let stream = 0; stream < EVENTS / 100; stream += 1)
      await log.append(
        `stats-${stream}`,
        Array.from({ length: 100 }, () => ({ id: randomUUID(), type: 'stats.recorded', data: { stream } })),
        NO_STREAM,
      );
  });
  afterAll(() => stale.close());

  const countedEvents = () => eventsCounted(sql);

  const lastAnalyzed = async () =>
    (
      await sql.query<{ at: Date | null }>(
        `SELECT last_analyze AS at FROM pg_stat_user_tables WHERE relname = 'event_log_events'`,
      )
    ).rows[0].at?.getTime();

  it('skips a table another session holds instead of waiting for it, reports it once, and the reads go on', async () => {
    const errors: Error[] = [];
    const blocked = await createPostgresEventLog({
      connectionString: database.connectionString,
      statisticsCheckDistance: 500,
      onError: (error) => errors.push(error),
    });
    const maintenance = new pg.Client({ connectionString: database.connectionString });
    await maintenance.connect();
    try {
      // What autovacuum, a manual VACUUM or an index being built holds.
      await maintenance.query('BEGIN; LOCK TABLE event_log_events IN SHARE UPDATE EXCLUSIVE MODE');
      const pages = [
        await blocked.readAllForProjections({ maxCount: 100 }),
        await blocked.readAll({ fromPosition: 100n, maxCount: 100 }),
      ];
      expect(pages.map(({ checkpoint, caughtUp }) => [checkpoint, caughtUp])).toEqual([
        [100n, false],
        [200n, false],
      ]);
      // One check a minute: the second page did not try again.
      expect(errors.map((error) => error.message)).toEqual([expect.stringMatching(/statistics stale/)]);
      expect(await countedEvents()).toBeLessThan(EVENTS / 2);
    } finally {
      await maintenance.query('ROLLBACK');
      await maintenance.end();
      await blocked.close();
    }
  });

  it('leaves them alone on reads near the head, and analyzes once a page stops far short of it', async () => {
    const stale = await countedEvents();
    expect(stale).toBeLessThan(EVENTS / 2);
    // Within the distance of the head, and a page that reaches the head: no check.
    await log.readAll({ fromPosition: BigInt(EVENTS - 400), maxCount: 100 });
    await log.readAllForProjections({ maxCount: EVENTS });
    expect(await countedEvents()).toBe(stale);

    const page = await log.readAllForProjections({ maxCount: 100 });
    expect(page).toMatchObject({ checkpoint: 100n, caughtUp: false });
    expect(await countedEvents()).toBe(EVENTS);
  });

  it('does not analyze statistics that count the log, however far behind a page stops', async () => {
    const analyzed = await lastAnalyzed();
    expect(analyzed).toBeDefined();
    const another = await createPostgresEventLog({
      connectionString: database.connectionString,
      statisticsCheckDistance: 500,
    });
    try {
      await another.readAllForProjections({ maxCount: 100 });
    } finally {
      await another.close();
    }
    expect(await lastAnalyzed()).toBe(analyzed);
  });
});
