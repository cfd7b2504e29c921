import pg from 'pg';

/**
 * How a request failed on the database, when the database (not the request, not the service) is why:
 * - `busy`: no pooled connection came free within the connect timeout (pg-pool's wait): nothing was sent;
 * - `unavailable`: no connection could be opened (refused, unanswered within the timeout, the server starting or
 *   out of connection slots): nothing was sent;
 * - `lost`: the connection broke while the request used it: a write may have been committed before it broke.
 */
export type DatabaseFailure = 'busy' | 'unavailable' | 'lost';

/** SQLSTATEs a server sends instead of opening a session: it cannot establish one, rejects it, is starting, is full. */
const UNAVAILABLE_SQLSTATES = new Set(['08001', '08004', '57P03', '53300']);
/** SQLSTATEs of a session the server ended (shutdown, crash of another backend) or a connection failure (class 08). */
const LOST_SQLSTATE = /^(08[0-9A-Z]{3}|57P0[12])$/;
/** What the operating system says when nothing answers at the database's address; only as the `connect` call's error. */
const UNREACHABLE_CODES = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'ETIMEDOUT']);

/**
 * Only shapes pg itself makes count, so that no other error (an upstream provider's reset, a client's aborted body,
 * an error of ours) passes for the database's. pg's own errors without a code are plain `Error`s with fixed words;
 * its server errors are `pg.DatabaseError`s. Looks through TypeORM's `driverError` and through `cause`.
 */
export function databaseFailure(error: unknown): DatabaseFailure | undefined {
  // Not `instanceof Error`: Node's system errors may come from another realm (under Jest's VM modules).
  for (let seen = error, depth = 0; typeof seen === 'object' && seen !== null && depth < 4; depth++) {
    const failure = ownFailure(seen as Error);
    if (failure) return failure;
    seen = (seen as { driverError?: unknown }).driverError ?? (seen as Error).cause;
  }
  return undefined;
}

function ownFailure(error: Error): DatabaseFailure | undefined {
  if (error instanceof pg.DatabaseError && error.code !== undefined) {
    if (UNAVAILABLE_SQLSTATES.has(error.code)) return 'unavailable';
    return LOST_SQLSTATE.test(error.code) ? 'lost' : undefined;
  }
  if (error.constructor === Error) {
    if (error.message === 'timeout exceeded when trying to connect') return 'busy';
    if (error.message === 'Connection terminated due to connection timeout') return 'unavailable';
    if (error.message === 'Connection terminated unexpectedly') return 'lost';
  }
  const { code, syscall } = error as { code?: unknown; syscall?: unknown };
  return syscall === 'connect' && typeof code === 'string' && UNREACHABLE_CODES.has(code) ? 'unavailable' : undefined;
}
