import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { HttpServerLimits } from '../config/ledger-config.js';

/** Node checks for expired requests every 30 s by default; more often, a timeout is enforced close to its value. */
const MAX_CHECKING_INTERVAL_MS = 30_000;

/**
 * Bounds what one client can hold: a body sent byte by byte is cut off (408) when the request
 * timeout passes, idle keep-alive connections close, and at the connection cap a newcomer makes
 * room (see `makeRoomAtCap`). The request timeout covers receiving the request only, so SSE
 * responses stream on. Set before `listen`, which reads the checking interval.
 */
export function applyServerLimits(server: Server, limits: HttpServerLimits, onEvicted: () => void): void {
  server.headersTimeout = limits.headersTimeoutMs;
  server.requestTimeout = limits.requestTimeoutMs;
  server.keepAliveTimeout = limits.keepAliveTimeoutMs;
  const checking = Math.min(MAX_CHECKING_INTERVAL_MS, Math.ceil(limits.headersTimeoutMs / 4));
  Object.assign(server, { connectionsCheckingInterval: checking });
  makeRoomAtCap(server, limits.maxConnections, onEvicted);
}

/**
 * The connection cap (decision 0029). Node's own `maxConnections` refuses newcomers, so clients
 * that never finish a request could hold every slot and lock everyone out until the headers
 * timeout, then reopen. Here a newcomer past the cap closes the connection that has waited
 * longest without a request in progress (headers not complete yet, or an idle keep-alive); one
 * whose headers are complete (a slow body, a response being made, a live stream) is never closed.
 * Only when every connection has a request in progress is the newcomer refused.
 */
function makeRoomAtCap(server: Server, cap: number, onEvicted: () => void): void {
  const open = new Set<Socket>();
  /** Connections with no request in progress, longest waiting first (a Set iterates in insertion order). */
  const waiting = new Set<Socket>();
  /** Requests in progress per connection (pipelined requests can overlap). */
  const inProgress = new Map<Socket, number>();

  const forget = (socket: Socket) => {
    open.delete(socket);
    waiting.delete(socket);
    inProgress.delete(socket);
  };
  server.on('connection', (socket: Socket) => {
    socket.once('close', () => forget(socket));
    if (open.size >= cap) {
      const longestWaiting = waiting.values().next();
      if (longestWaiting.done) {
        socket.destroy();
        return;
      }
      forget(longestWaiting.value);
      longestWaiting.value.destroy();
      onEvicted();
    }
    open.add(socket);
    waiting.add(socket);
  });
  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    const socket = request.socket;
    if (!open.has(socket)) return;
    waiting.delete(socket);
    inProgress.set(socket, (inProgress.get(socket) ?? 0) + 1);
    response.once('close', () => {
      const left = (inProgress.get(socket) ?? 1) - 1;
      if (left > 0) return void inProgress.set(socket, left);
      inProgress.delete(socket);
      // Waiting again from now, behind every connection that has waited longer.
      if (open.has(socket)) waiting.add(socket);
    });
  });
}
