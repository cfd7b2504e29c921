import type { Server } from 'node:http';
import type { HttpServerLimits } from '../config/ledger-config.js';

/** Node checks for expired requests every 30 s by default; more often, a timeout is enforced close to its value. */
const MAX_CHECKING_INTERVAL_MS = 30_000;

/**
 * Bounds what one client can hold: a body sent byte by byte is cut off (408) when the request
 * timeout passes, idle keep-alive connections close, and connections beyond the cap are closed
 * on arrival. The request timeout covers receiving the request only, so SSE responses stream on.
 * Set before `listen`, which reads the checking interval.
 */
export function applyServerLimits(server: Server, limits: HttpServerLimits): void {
  server.headersTimeout = limits.headersTimeoutMs;
  server.requestTimeout = limits.requestTimeoutMs;
  server.keepAliveTimeout = limits.keepAliveTimeoutMs;
  server.maxConnections = limits.maxConnections;
  const checking = Math.min(MAX_CHECKING_INTERVAL_MS, Math.ceil(limits.headersTimeoutMs / 4));
  Object.assign(server, { connectionsCheckingInterval: checking });
}
