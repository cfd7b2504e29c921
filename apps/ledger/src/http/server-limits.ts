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
 * longest without a request in progress (headers not complete yet, or an idle keep-alive); when
 * there is none, the one whose client has left its response untaken longest (written, still
 * queued: no timeout ends that wait, and no key is needed to cause it). One whose headers are
 * complete and whose client takes what it is sent (a slow body, a response being made, a live
 * stream being read) is never closed. Only when every connection has such a request is the
 * newcomer refused.
 */
function makeRoomAtCap(server: Server, cap: number, onEvicted: () => void): void {
  const open = new Set<Socket>();
  /** Connections with no request in progress, longest waiting first (a Set iterates in insertion order). */
  const waiting = new Set<Socket>();
  /** Requests in progress per connection (pipelined requests can overlap). */
  const inProgress = new Map<Socket, number>();
  /** Per connection with a request in progress: when its client last took all it was sent (an order, not a time). */
  const lastTaken = new Map<Socket, number>();
  let moments = 0;

  const forget = (socket: Socket) => {
    open.delete(socket);
    waiting.delete(socket);
    inProgress.delete(socket);
    lastTaken.delete(socket);
  };
  const longestWaiting = (): Socket | undefined => {
    const idle = waiting.values().next();
    if (!idle.done) return idle.value;
    let untaken: Socket | undefined;
    let since = Infinity;
    for (const [socket, taken] of lastTaken) {
      if (!socket.writableNeedDrain || taken >= since) continue;
      untaken = socket;
      since = taken;
    }
    return untaken;
  };
  server.on('connection', (socket: Socket) => {
    socket.once('close', () => forget(socket));
    socket.on('drain', () => {
      if (lastTaken.has(socket)) lastTaken.set(socket, ++moments);
    });
    if (open.size >= cap) {
      const evicted = longestWaiting();
      if (!evicted) {
        socket.destroy();
        return;
      }
      forget(evicted);
      evicted.destroy();
      onEvicted();
    }
    open.add(socket);
    waiting.add(socket);
  });
  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    const socket = request.socket;
    if (!open.has(socket)) return;
    waiting.delete(socket);
    const requests = (inProgress.get(socket) ?? 0) + 1;
    inProgress.set(socket, requests);
    if (requests === 1) lastTaken.set(socket, ++moments);
    response.once('close', () => {
      const left = (inProgress.get(socket) ?? 1) - 1;
      if (left > 0) return void inProgress.set(socket, left);
      inProgress.delete(socket);
      lastTaken.delete(socket);
      // Waiting again from now, behind every connection that has waited longer.
      if (open.has(socket)) waiting.add(socket);
    });
  });
}
