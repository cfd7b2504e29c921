import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyReply } from 'fastify';

/**
 * What the HTTP adapter refuses before any hook or route, answered in the API's error shape like
 * every other refusal, without echoing the request or naming the framework.
 */

/** The router's own refusals: a path that is not valid percent-encoding. */
export function routerRefusal(error: FastifyError, _request: unknown, reply: FastifyReply): void {
  const status = error.statusCode !== undefined && error.statusCode < 500 ? error.statusCode : 400;
  const message =
    error.code === 'FST_ERR_BAD_URL'
      ? 'the request path is not valid percent-encoding'
      : 'the request cannot be routed';
  void reply.code(status).send({ error: { code: 'bad_request', message, field: '(path)' } });
}

/** Node's refusals of a connection's bytes (not HTTP, too slow, headers too large), before any request exists. */
export function connectionRefusal(error: NodeJS.ErrnoException, socket: Socket): void {
  // A reset connection has no one to answer.
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, code, message] =
    error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? [408, 'request_timeout', 'the request was not received within the request timeout']
      : error.code === 'HPE_HEADER_OVERFLOW'
        ? [431, 'headers_too_large', 'the request headers are too large']
        : [400, 'bad_request', 'the request is not valid HTTP'];
  const body = JSON.stringify({ error: { code, message } });
  // A response already under way on this connection (a live feed) is not written into, as Node does.
  const inProgress = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (socket.writable && !inProgress?.headersSent) {
    const head = `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nConnection: close\r\nContent-Type: application/json`;
    socket.write(`${head}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  }
  socket.destroy();
}
