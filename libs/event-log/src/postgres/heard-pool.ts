import pg from 'pg';

/**
 * A pool whose connections' failures go to `onError`. A connection the server ends (a restart, a terminated backend,
 * an embedded PostgreSQL stopping) emits an error, idle in the pool or checked out between two queries; unheard, it
 * ends the process with a stack. The next query on such a connection fails instead, and the pool opens another.
 */
export function heardPool(config: pg.PoolConfig, onError: (error: Error) => void): pg.Pool {
  const pool = new pg.Pool(config);
  // The pool passes on an idle connection's error, which the connection's own listener has already heard.
  pool.on('error', () => undefined);
  pool.on('connect', (client) => client.on('error', onError));
  return pool;
}
