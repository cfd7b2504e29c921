import type pg from 'pg';

/** The tables a read of the log joins. */
export const LOG_TABLES = ['event_log_events', 'event_log_streams', 'event_log_envelopes'] as const;
/** The statistics are checked at most this often per log instance. */
const CHECK_INTERVAL_MS = 60_000;

/**
 * Keeps the planner's statistics of the log from lagging far behind the log. With statistics of a
 * far smaller table (a log loaded or restored since its last ANALYZE, before autovacuum comes round),
 * PostgreSQL looks each event's stream and envelope up by scanning their whole tables (and, but for
 * `pageQuery`'s care, would fetch and sort every event up to the head for each page): a rebuild of
 * 211,200 events read 22,000 events/s instead of 190,000 (decision 0046). So a page that stops far
 * short of the head checks them, and the log's tables are analyzed when they count under half its
 * events.
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
      if (!(await this.stale(head))) return;
      // SKIP_LOCKED: a table someone holds (autovacuum, a manual VACUUM, an index being built) is
      // skipped, not waited for; the reads behind this check would wait too.
      await this.pool.query(`ANALYZE (SKIP_LOCKED) ${LOG_TABLES.join(', ')}`);
      // A skipped table, or a role that does not own the tables, gets a warning, not an error.
      if (await this.stale(head))
        throw new Error(
          'event log: ANALYZE left the statistics stale (a table was locked, or this role does not own the tables)',
        );
    } catch (error) {
      // Reads go on without: the statistics make them faster, not right.
      this.onError(error as Error);
    }
  }

  /** Resolves once no check is under way: the pool may end. */
  async settled(): Promise<void> {
    await this.checking;
  }

  /** Positions are gap-free and nothing is deleted: the head is the number of events. */
  private async stale(head: bigint): Promise<boolean> {
    const { rows } = await this.pool.query<{ events: number }>(
      `SELECT reltuples::float8 AS events FROM pg_class WHERE oid = 'event_log_events'::regclass`,
    );
    return rows[0].events < Number(head) / 2;
  }
}
