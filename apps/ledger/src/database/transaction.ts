import pg, { type Pool, type PoolClient } from 'pg';

/**
 * Runs `work` in one transaction: committed if it returns, rolled back if it throws. On a pooled
 * connection taken for it, or on `client` when the caller holds one already (a projection's lock).
 */
export async function inTransaction<T>(on: Pool | PoolClient, work: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = on instanceof pg.Pool ? await on.connect() : on;
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    if (client !== on) client.release();
  }
}

/**
 * Runs `work` while a session of the pool holds the advisory lock `key`, taken without waiting: `refused()` is
 * thrown when another session holds it.
 */
export async function whileHolding<T>(
  pool: Pool,
  key: string,
  refused: () => Error,
  work: () => Promise<T>,
): Promise<T> {
  const lock = await pool.connect();
  try {
    const { rows } = await lock.query<{ held: boolean }>('SELECT pg_try_advisory_lock($1::bigint) AS held', [key]);
    if (!rows[0].held) throw refused();
    try {
      return await work();
    } finally {
      await lock.query('SELECT pg_advisory_unlock($1::bigint)', [key]);
    }
  } finally {
    lock.release();
  }
}
