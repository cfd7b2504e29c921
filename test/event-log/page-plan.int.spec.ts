import { randomUUID } from 'node:crypto';
import { NO_STREAM, type EventFilter, type EventLog } from '#event-log';
import type pg from 'pg';
import { pageQuery } from '../../libs/event-log/src/postgres/postgres-event-log.js';
import { rowsRead, type PlanNode } from '../support/query-plans.js';
import { eventsCounted, logWithStaleStatistics, type LogWithStaleStatistics } from '../support/stale-log-statistics.js';

const STREAMS = 100;
const EVENTS_PER_STREAM = 200;
const PAGE = 100;

/** A log appended to since its tables were last analyzed (`logWithStaleStatistics`). */
describe('a page of the PostgreSQL log on statistics older than the log', () => {
  let stale: LogWithStaleStatistics;
  let sql: pg.Client;
  let log: EventLog;
  beforeAll(async () => {
    // Far enough from the head never to analyze them itself: what is planned here is the page alone.
    stale = await logWithStaleStatistics(STREAMS * EVENTS_PER_STREAM);
    ({ sql, log } = stale);
    for (let start = 0; start < STREAMS; start += 10)
      await log.appendMany(
        Array.from({ length: 10 }, (_, index) => ({
          streamId: `${(start + index) % 2 === 0 ? 'even' : 'odd'}-${start + index}`,
          expectedRevision: NO_STREAM,
          events: Array.from({ length: EVENTS_PER_STREAM }, () => ({
            id: randomUUID(),
            type: 'plan.tested',
            data: {},
          })),
        })),
      );
  }, 60_000);
  afterAll(() => stale.close());

  it.each<[string, EventFilter | undefined]>([
    ['unfiltered', undefined],
    ['filtered by stream', { streamPrefixes: ['odd-'] }],
  ])(
    '%s, from far behind the head, takes the page from the log and not everything up to the head',
    async (_, filter) => {
      const { text, filterParams } = pageQuery(['position', 'stream_id', 'data'], filter);
      const { rows } = await sql.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
        `EXPLAIN (ANALYZE, FORMAT JSON) ${text}`,
        ['1000', PAGE, 8 * 1024 * 1024, ...filterParams],
      );
      // The filter keeps every other stream's events, in runs of EVENTS_PER_STREAM: a page may pass one run.
      expect(rowsRead(rows[0]['QUERY PLAN'][0].Plan, ['event_log_events'])).toBeLessThanOrEqual(
        PAGE + EVENTS_PER_STREAM,
      );
      const page = await log.readAll({ fromPosition: 1000n, maxCount: PAGE, filter });
      expect(page.events).toHaveLength(PAGE);
      expect(page.caughtUp).toBe(false);
      expect(await eventsCounted(sql)).toBeLessThan((STREAMS * EVENTS_PER_STREAM) / 2);
    },
  );
});
