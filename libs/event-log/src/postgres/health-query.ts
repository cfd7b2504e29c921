import type pg from 'pg';

/** How long a health check may take: a probe that waits on an unreachable part answers down, not never. */
export const HEALTH_ANSWER_MS = 1_000;

/**
 * Options for a pool of one connection that health checks ask on: the service's pools may be full of requests,
 * which is load, not an outage. It opens within the check's time and is kept open between checks.
 */
export function healthPoolOptions(options: pg.PoolConfig): pg.PoolConfig {
  return { ...options, max: 1, connectionTimeoutMillis: HEALTH_ANSWER_MS, idleTimeoutMillis: 0 };
}

/**
 * `text`'s rows, from a connection of `pool`, within `HEALTH_ANSWER_MS`. A connection that failed or did not answer in
 * time is thrown away: hung (cut half-open, a frozen server), it would hold every later check.
 */
export async function healthQuery<Row extends pg.QueryResultRow>(
  pool: pg.Pool,
  text: string,
  values: readonly unknown[] = [],
): Promise<Row[]> {
  const client = await pool.connect();
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${HEALTH_ANSWER_MS} ms`)), HEALTH_ANSWER_MS);
  });
  try {
    const { rows } = await Promise.race([client.query<Row>(text, [...values]), late]);
    client.release();
    return rows;
  } catch (error) {
    client.release(error as Error);
    throw error;
  } finally {
    clearTimeout(timer);
  }
}
