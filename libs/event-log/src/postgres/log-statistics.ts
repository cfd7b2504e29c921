import type pg from 'pg';

/** The tables a read of the log joins. */
const LOG_TABLES = 'event_log_events, event_log_streams, event_log_envelopes';
/** The statistics are checked at most this often per log. */
const CHECK_INTERVAL_MS = 60_000;

/**
 * Keeps the planner's statistics of the log from lagging far behind the log. A page is the first
 * events after a position, up to a head the planner cannot see when it plans. With statistics of a
 * far smaller table (a log loaded or restored since its last ANALYZE, before autovacuum comes round),
 * PostgreSQL fetches every event up to the head and sorts them for each page: a read from far behind
 * costs the square of its length (a rebuild of 211,200 events read 22,000 events/s instead of
 * 190,000; docs/benchmarks.md, "Eighteenth issue-15 round"). So a page that stops far short of the
 * head checks them, and the log's tables are analyzed when they count under half its events.
 */
export class LogStatistics {
  private checkedAt = Number.NEGATIVE_INFINITY;
  private checking: Promise<void> | undefined;

  constructor(
    private readonly pool: pg.Pool,
    /** Events between a page's end and the head from which the statistics are checked. */
    private readonly checkDistance: number,
    private readonly onError: (error: Error) => void,
  ) {}

  /** After a page that reached `reached` with the log's head at `head`. Resolves once any analysis is done. */
  async afterPage(reached: bigint, head: bigint): Promise<void> {
    if (head - reached < BigInt(this.checkDistance)) return;
    if (performance.now() - this.checkedAt < CHECK_INTERVAL_MS) return;
    this.checking ??= this.check(head).finally(() => {
      this.checkedAt = performance.now();
      this.checking = undefined;
    });
    await this.checking;
  }

  private async check(head: bigint): Promise<void> {
    try {
      // Positions are gap-free and nothing is deleted: the head is the number of events.
      const { rows } = await this.pool.query<{ events: number }>(
        `SELECT reltuples::float8 AS events FROM pg_class WHERE oid = 'event_log_events'::regclass`,
      );
      if (rows[0].events < Number(head) / 2) await this.pool.query(`ANALYZE ${LOG_TABLES}`);
    } catch (error) {
      // Reads go on without: the statistics make them faster, not right.
      this.onError(error as Error);
    }
  }
}
