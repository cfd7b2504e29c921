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
