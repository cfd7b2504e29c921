/**
 * SQLSTATEs of a server that cannot serve now, whatever the request: connection exceptions (class 08), a server
 * shutting down, crashed or starting (57P01–57P03), no connection slot left (53300).
 */
const UNAVAILABLE_SQLSTATE = /^(08[0-9A-Z]{3}|57P0[1-3]|53300)$/;
/** What the network says when no server answers at the address. */
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EHOSTUNREACH', 'ENETUNREACH', 'ETIMEDOUT', 'EPIPE']);
/**
 * pg's own words for a connection that could not be opened in time (the pool's and the client's) or was lost
 * before an answer: they carry no code, and are plain `Error`s (no error of ours can pass for one).
 */
const DRIVER_MESSAGES = /^(timeout exceeded when trying to connect|Connection terminated\b|Client was closed\b)/;

/**
 * Whether `error` says PostgreSQL cannot be reached or cannot serve now, rather than that the request is wrong or
 * the service is broken: the request may succeed later, so it is a 503, not a 500. Looks through TypeORM's
 * `driverError` and `cause`.
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  for (let seen = error, depth = 0; seen && typeof seen === 'object' && depth < 4; depth++) {
    const { code, message, driverError, cause } = seen as Record<string, unknown>;
    if (typeof code === 'string' && (UNAVAILABLE_SQLSTATE.test(code) || NETWORK_CODES.has(code))) return true;
    if (seen.constructor === Error && typeof message === 'string' && DRIVER_MESSAGES.test(message)) return true;
    seen = driverError ?? cause;
  }
  return false;
}
