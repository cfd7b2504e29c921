import net from 'node:net';
import pg from 'pg';
import { QueryFailedError } from 'typeorm';
import { databaseFailure } from '../../apps/ledger/src/database/database-unavailable.js';
import { ApiError } from '../../apps/ledger/src/http/api-error.js';

function sqlError(code: string, message = 'failed'): pg.DatabaseError {
  const error = new pg.DatabaseError(message, message.length, 'error');
  error.code = code;
  return error;
}

/** A system error as Node makes it for a failed `syscall`. */
function systemError(code: string, syscall: string): Error {
  return Object.assign(new Error(`${syscall} ${code}`), { code, syscall, errno: -1 });
}

async function listening(server: net.Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as net.AddressInfo).port;
}

/** The error a real pg pool of one connection gives a query, with a connect timeout of 300 ms. */
async function poolError(port: number, before?: (pool: pg.Pool) => Promise<unknown>): Promise<Error> {
  const pool = new pg.Pool({ host: '127.0.0.1', port, connectionTimeoutMillis: 300, max: 1 });
  pool.on('error', () => undefined);
  const first = before?.(pool);
  try {
    return await pool.query('SELECT 1').then(
      () => new Error('answered'),
      (error: Error) => error,
    );
  } finally {
    await first?.catch(() => undefined);
    await pool.end();
  }
}

describe('how a failure on the database is told (decision 0063)', () => {
  it.each([
    ['a server refusing new sessions (08004)', sqlError('08004'), 'unavailable'],
    ['a server starting or shutting down (57P03)', sqlError('57P03'), 'unavailable'],
    ['no connection slot left (53300)', sqlError('53300'), 'unavailable'],
    ['nothing listening at the address', systemError('ECONNREFUSED', 'connect'), 'unavailable'],
    ['a session the server ended (57P01)', sqlError('57P01'), 'lost'],
    ['a broken connection (08006)', sqlError('08006'), 'lost'],
    ['a session ended, as TypeORM wraps it', new QueryFailedError('SELECT 1', [], sqlError('57P01')), 'lost'],
    [
      'a lost connection, as a cause',
      new Error('failed', { cause: new Error('Connection terminated unexpectedly') }),
      'lost',
    ],
  ])('%s: %s', (_, error, failure) => {
    expect(databaseFailure(error)).toBe(failure);
  });

  it.each([
    ['a unique violation (23505)', sqlError('23505')],
    ['a syntax error (42601)', sqlError('42601')],
    ['a value out of range, as TypeORM wraps it', new QueryFailedError('SELECT $1', [1], sqlError('22003'))],
    [
      'an error of ours whose message reads like the driver',
      new ApiError(400, 'invalid_request', 'Connection terminated unexpectedly'),
    ],
    ["an error that copies an SQLSTATE but is not the driver's", Object.assign(new Error('x'), { code: '57P03' })],
    [
      "an upstream provider's reset mid-body (Node's `aborted`)",
      Object.assign(new Error('aborted'), { code: 'ECONNRESET' }),
    ],
    ["a client's aborted request body", Object.assign(systemError('ECONNRESET', 'read'), { statusCode: 400 })],
    [
      'an upstream unreachable, behind fetch',
      new TypeError('fetch failed', { cause: systemError('ECONNREFUSED', 'getaddrinfo') }),
    ],
    ['a string', 'Connection terminated unexpectedly'],
    ['nothing', undefined],
  ])('%s: not the database', (_, error) => {
    expect(databaseFailure(error)).toBeUndefined();
  });

  it('is what a real pool says: nothing listening, a server that never answers, no connection free in time', async () => {
    const closed = net.createServer();
    const closedPort = await listening(closed);
    await new Promise((resolve) => closed.close(resolve));
    const refused = await poolError(closedPort);
    expect(refused).toMatchObject({ code: 'ECONNREFUSED', syscall: 'connect' });

    const sockets = new Set<net.Socket>();
    const silent = net.createServer((socket) => void sockets.add(socket));
    const silentPort = await listening(silent);
    try {
      const unanswered = await poolError(silentPort);
      // The one connection is still being opened when the query asks for another: it waits for it.
      const queued = await poolError(silentPort, (pool) => pool.connect());
      expect([refused, unanswered, queued].map(databaseFailure)).toEqual(['unavailable', 'unavailable', 'busy']);
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });
});
