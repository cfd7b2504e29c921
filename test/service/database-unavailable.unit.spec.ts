import net from 'node:net';
import pg from 'pg';
import { QueryFailedError } from 'typeorm';
import { isDatabaseUnavailable } from '../../apps/ledger/src/database/database-unavailable.js';
import { ApiError } from '../../apps/ledger/src/http/api-error.js';

function sqlError(code: string, message = 'failed'): pg.DatabaseError {
  const error = new pg.DatabaseError(message, message.length, 'error');
  error.code = code;
  return error;
}

/** The error a real pg pool gives for `connection`, with a connect timeout of 300 ms. */
async function poolError(port: number): Promise<Error> {
  const pool = new pg.Pool({ host: '127.0.0.1', port, connectionTimeoutMillis: 300, max: 1 });
  try {
    return await pool.query('SELECT 1').then(
      () => {
        throw new Error('answered');
      },
      (error: Error) => error,
    );
  } finally {
    await pool.end();
  }
}

describe('what counts as the database being unavailable (answered 503, not 500)', () => {
  it.each([
    ['the server went away (08006)', sqlError('08006')],
    ['the server is shutting down (57P01)', sqlError('57P01', 'terminating connection due to administrator command')],
    ['the server is starting (57P03)', sqlError('57P03')],
    ['no connection slot left (53300)', sqlError('53300')],
    ['a dropped connection, as TypeORM wraps it', new QueryFailedError('SELECT 1', [], sqlError('57P01'))],
    [
      'a lost connection, as a cause',
      new Error('the append failed', { cause: new Error('Connection terminated unexpectedly') }),
    ],
  ])('%s', (_, error) => {
    expect(isDatabaseUnavailable(error)).toBe(true);
  });

  it.each([
    ['a unique violation (23505)', sqlError('23505')],
    ['a syntax error (42601)', sqlError('42601')],
    ['a value out of range (22003)', new QueryFailedError('SELECT $1', [1], sqlError('22003'))],
    [
      'an error of ours whose message reads like the driver',
      new ApiError(400, 'invalid_request', 'Connection terminated'),
    ],
    ['a plain error that merely mentions a timeout', new Error('request timeout exceeded')],
    ['a string', 'Connection terminated'],
    ['nothing', undefined],
  ])('%s: the request or the service, not the database', (_, error) => {
    expect(isDatabaseUnavailable(error)).toBe(false);
  });

  it('is what a real pool says when nothing listens, and when a server never answers', async () => {
    const closed = net.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const closedPort = (closed.address() as net.AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const refused = await poolError(closedPort);
    expect(refused).toMatchObject({ code: 'ECONNREFUSED' });

    const sockets = new Set<net.Socket>();
    const silent = net.createServer((socket) => void sockets.add(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      const unanswered = await poolError((silent.address() as net.AddressInfo).port);
      expect(unanswered.message).toMatch(/timeout/);
      expect([refused, unanswered].map(isDatabaseUnavailable)).toEqual([true, true]);
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });
});
