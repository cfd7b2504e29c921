import { Controller, Get, Inject, Param, Query, Req, Res, type BeforeApplicationShutdown } from '@nestjs/common';
import { storableJson } from '#core';
import type { EventLog } from '#event-log';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { LEDGER_CONFIG, type LedgerConfig } from '../config/ledger-config.js';
import { EVENT_LOG } from '../event-log/event-log-token.js';
import { ApiError, RetryLater } from '../http/api-error.js';
import { refuseBeyondHead } from '../http/log-positions.js';
import { LedgerMetrics } from '../metrics/ledger-metrics.js';
import { routeKey } from '../identity/auth.guard.js';
import { CredentialWatch } from '../identity/credential-watch.js';
import { CurrentPrincipal } from '../identity/current-principal.js';
import type { Principal } from '../identity/principal.js';
import { LiveHub } from './live-hub.js';
import { LiveWriteBudget } from './live-write-budget.js';
import { SseStream } from './sse-stream.js';

const position = z
  .string()
  .regex(/^\d+$/, 'must be a log position (a non-negative integer)')
  .transform((value) => BigInt(value));
/** Comma-separated prefixes; none given (`?types=`) filters nothing, rather than everything out. */
const prefixes = z
  .string()
  .max(2_000)
  .transform((value) =>
    value
      .split(',')
      .map((prefix) => prefix.trim())
      .filter((prefix) => prefix !== ''),
  )
  .transform((list) => (list.length > 0 ? list : undefined));
const CATCH_UP_TIMEOUT_MS = 5_000;
export const sessionLiveQuery = z.object({ from: position.optional() });
// Prefixes are bound for PostgreSQL, which takes no NUL: refused naming the parameter, as a body's string would be.
export const eventsLiveQuery = storableJson(
  z.object({
    from: position.optional(),
    types: prefixes.optional(),
    streams: prefixes.optional(),
  }),
);

/**
 * Server-Sent Events. `id:` is the log position; a client resumes with `Last-Event-ID` (or
 * `?from=`, e.g. the `position` of a snapshot read) and gets nothing twice and nothing missed.
 */
@Controller('v1')
export class LiveController implements BeforeApplicationShutdown {
  private readonly streams = new Set<SseStream>();
  private readonly writeBudget: LiveWriteBudget;
  /** Open streams per credential and per tenant, for the caps. */
  private readonly openPerCredential = new OpenCounts();
  private readonly openPerTenant = new OpenCounts();

  constructor(
    private readonly hub: LiveHub,
    @Inject(EVENT_LOG) private readonly eventLog: EventLog,
    @Inject(LEDGER_CONFIG) private readonly config: LedgerConfig,
    private readonly metrics: LedgerMetrics,
    private readonly credentials: CredentialWatch,
  ) {
    this.writeBudget = new LiveWriteBudget(config.live);
  }

  /** Read-model changes of one session: `message`, `block`, `selection` events; without a resume point it starts with the whole session. */
  @Get('sessions/:sid/live')
  async session(
    @Param('sid') sessionId: string,
    @Query() query: unknown,
    @Req() request: FastifyRequest,
    @Res() response: FastifyReply,
    @CurrentPrincipal() principal: Principal,
  ): Promise<void> {
    const from = await this.resumePoint(request, sessionLiveQuery.parse(query).from);
    const release = this.admit(principal);
    let stream: SseStream | undefined;
    let unwatch = () => {};
    try {
      // A client coming from an instance that was ahead waits until this one has caught up.
      if (from !== undefined && !(await this.hub.reach(from, CATCH_UP_TIMEOUT_MS))) {
        const message = `this instance has not reached position ${from} within ${CATCH_UP_TIMEOUT_MS} ms; retry`;
        throw new RetryLater('live_feed_behind', message, 'Last-Event-ID');
      }
      const watching = await this.hub.watch({ tenant: principal.tenant, sessionId }, from, () => {
        stream = this.open(request, response, from, principal, () => {
          release();
          unwatch();
        });
        return stream;
      });
      if (!watching) throw new ApiError(404, 'session_not_found', 'no such session');
      unwatch = watching.unwatch;
      if (stream!.isClosed) unwatch();
    } catch (error) {
      // Nothing opened: the connection it was admitted for is given back.
      if (!stream) release();
      throw error;
    }
  }

  /** Raw events across sessions, for auditors' tools: `?types=` and `?streams=` are comma-separated prefixes. Each client follows the log on its own, at its own pace. */
  @Get('events/live')
  async events(
    @Query() query: unknown,
    @Req() request: FastifyRequest,
    @Res() response: FastifyReply,
    @CurrentPrincipal() principal: Principal,
  ): Promise<void> {
    const { from: fromQuery, types, streams } = eventsLiveQuery.parse(query);
    const from = (await this.resumePoint(request, fromQuery)) ?? (await this.eventLog.headPosition());
    const release = this.admit(principal);
    const subscription = this.eventLog.subscribeToAll({
      fromPosition: from,
      filter: { eventTypePrefixes: types, streamPrefixes: streams },
    });
    const stream = this.open(request, response, from, principal, () => {
      release();
      void subscription.close();
    });
    try {
      for await (const batch of subscription) {
        // Every event carries its tenant; a client sees its own tenant's only, whatever prefixes it asked for.
        const own = batch.events.filter((event) => event.metadata.tenant === principal.tenant);
        if (own.length > 0)
          await stream.send(
            own.map((event) => ({
              id: event.position,
              data: { ...event, revision: Number(event.revision), position: Number(event.position) },
            })),
          );
        if (stream.isClosed) break;
      }
    } finally {
      stream.close('shutdown');
    }
  }

  /** Open streams would keep the HTTP server from closing. */
  beforeApplicationShutdown(): void {
    for (const stream of this.streams) stream.close('shutdown');
  }

  /**
   * Takes one of the credential's and one of its tenant's live connections, or refuses beyond
   * either cap. Taken at once, before anything is awaited, so connections opened together cannot
   * all pass a check made before any of them counted; the returned function gives them back (once).
   */
  private admit({ credentialId, tenant }: Principal): () => void {
    const { liveConnectionsPerCredential, liveConnectionsPerTenant } = this.config.identity;
    if (this.openPerCredential.of(credentialId) >= liveConnectionsPerCredential) {
      const message = `this credential has ${liveConnectionsPerCredential} live connections open already`;
      throw new ApiError(429, 'too_many_live_connections', message, undefined, 'live_connections');
    }
    // Several credentials of one tenant together: the tenant's cap keeps connection slots for other tenants.
    if (this.openPerTenant.of(tenant) >= liveConnectionsPerTenant) {
      const message = `this tenant has ${liveConnectionsPerTenant} live connections open already`;
      throw new ApiError(429, 'too_many_live_connections', message, undefined, 'tenant_live_connections');
    }
    this.openPerCredential.add(credentialId);
    this.openPerTenant.add(tenant);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.openPerCredential.remove(credentialId);
      this.openPerTenant.remove(tenant);
    };
  }

  /** The stream, open until its client leaves, the service stops, or its credential no longer admits it. */
  private open(
    request: FastifyRequest,
    response: FastifyReply,
    from: bigint | undefined,
    principal: Principal,
    release: () => void,
  ): SseStream {
    this.metrics.liveClientOpened();
    // The stream writes to the connection itself from here on; Fastify sends nothing more.
    response.hijack();
    const stream = new SseStream(
      response.raw,
      this.config.live,
      (reason) => {
        this.streams.delete(stream);
        this.metrics.liveClientClosed(reason);
        unwatch();
        release();
      },
      from,
      this.writeBudget,
      principal.tenant,
    );
    const route = routeKey(request.method, request.routeOptions.url ?? request.url);
    const unwatch = this.credentials.watch(request.raw, route, principal, () => stream.close('credential_ended'));
    this.streams.add(stream);
    return stream;
  }

  /** `?from=` or `Last-Event-ID`; one beyond the log head cannot be a position the client saw. */
  private async resumePoint(request: FastifyRequest, from: bigint | undefined): Promise<bigint | undefined> {
    const header = request.headers['last-event-id'];
    let resume = from;
    if (resume === undefined && typeof header === 'string' && header !== '') {
      const parsed = position.safeParse(header);
      if (!parsed.success)
        throw new ApiError(
          400,
          'invalid_last_event_id',
          'Last-Event-ID must be a log position sent by this service',
          'Last-Event-ID',
        );
      resume = parsed.data;
    }
    await refuseBeyondHead(this.eventLog, resume, from !== undefined ? 'from' : 'Last-Event-ID');
    return resume;
  }
}

/** How many live streams each holder (a credential, a tenant) has open; holders with none take no memory. */
class OpenCounts {
  private readonly counts = new Map<string, number>();

  of(holder: string): number {
    return this.counts.get(holder) ?? 0;
  }

  add(holder: string): void {
    this.counts.set(holder, this.of(holder) + 1);
  }

  remove(holder: string): void {
    const left = this.of(holder) - 1;
    if (left <= 0) this.counts.delete(holder);
    else this.counts.set(holder, left);
  }
}
