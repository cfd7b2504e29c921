import { Injectable } from '@nestjs/common';
import type { CommitStats } from '#event-log';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/** The service's Prometheus registry and the metrics its parts record. */
@Injectable()
export class LedgerMetrics {
  readonly registry = new Registry();

  private readonly appendedEvents = new Counter({
    name: 'ledger_event_log_appended_events_total',
    help: 'Events committed to the event log',
    registers: [this.registry],
  });

  private readonly commitEvents = new Histogram({
    name: 'ledger_event_log_commit_events',
    help: 'Events per group commit',
    buckets: [1, 10, 100, 1_000, 5_000],
    registers: [this.registry],
  });

  private readonly commitSeconds = new Histogram({
    name: 'ledger_event_log_commit_seconds',
    help: 'Duration of one group commit',
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1],
    registers: [this.registry],
  });

  private readonly liveClients = new Gauge({
    name: 'ledger_live_clients',
    help: 'Open live (SSE) connections',
    registers: [this.registry],
  });

  private readonly liveDisconnects = new Counter({
    name: 'ledger_live_disconnects_total',
    help: 'Closed live connections, by reason (slow_client: cut off for not keeping up)',
    labelNames: ['reason'],
    registers: [this.registry],
  });

  private readonly toolCallsCompleted = new Counter({
    name: 'ledger_tool_calls_completed_total',
    help: 'Governed tool calls completed, by outcome (succeeded, failed, denied)',
    labelNames: ['outcome'],
    registers: [this.registry],
  });

  private readonly toolCallStepSeconds = new Histogram({
    name: 'ledger_tool_call_step_seconds',
    help: 'Duration of the governance steps that wait on something outside: the guardian review and the MCP execution',
    labelNames: ['step'],
    buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60],
    registers: [this.registry],
  });

  private readonly refusedRequests = new Counter({
    name: 'ledger_http_refused_total',
    help: 'Requests refused before they did anything: 401 (credential), 403 (role, tenant writer rule), 429 (rate or live-connection limit), by reason',
    labelNames: ['status', 'reason'],
    registers: [this.registry],
  });

  private readonly evictedConnections = new Counter({
    name: 'ledger_http_connections_evicted_total',
    help:
      'Connections closed at the connection cap to make room for a newcomer: each had waited longest ' +
      'without a request in progress (headers not complete, or idle keep-alive)',
    registers: [this.registry],
  });

  private readonly upstreamAttempts = new Counter({
    name: 'ledger_gateway_upstream_attempts_total',
    help: 'Gateway calls to an upstream provider, by upstream, key (short hash of the key) and outcome',
    labelNames: ['upstream', 'key', 'outcome'],
    registers: [this.registry],
  });

  private readonly upstreamCooldowns = new Counter({
    name: 'ledger_gateway_upstream_key_cooldowns_total',
    help:
      'Upstream keys taken out of their pool, by upstream, key (short hash) and reason ' +
      '(rate_limited, failure_rate, unauthorized: until reload)',
    labelNames: ['upstream', 'key', 'reason'],
    registers: [this.registry],
  });

  private readonly unrecordedEvents = new Counter({
    name: 'ledger_gateway_unrecorded_events_total',
    help: 'Provider events the gateway relayed to a client but could not record (each answer that lost some is marked)',
    registers: [this.registry],
  });

  private readonly recordingFailures = new Counter({
    name: 'ledger_gateway_recording_failures_total',
    help: 'Gateway records the log refused or could not take (a request placement, a batch of events, an ending)',
    registers: [this.registry],
  });

  private upstreamKeysSource: () => Iterable<{ upstream: string; available: number }> = () => [];

  private readonly upstreamAvailableKeys = new Gauge({
    name: 'ledger_gateway_upstream_available_keys',
    help: 'Keys of each upstream that can be tried now (neither cooling nor disabled)',
    labelNames: ['upstream'],
    registers: [this.registry],
    // Cooldowns end with time, not with an event: the count is taken at each scrape.
    collect: () => {
      this.upstreamAvailableKeys.reset();
      for (const { upstream, available } of this.upstreamKeysSource()) {
        this.upstreamAvailableKeys.set({ upstream }, available);
      }
    },
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry });
  }

  requestRefused(status: number, reason: string): void {
    this.refusedRequests.inc({ status: String(status), reason });
  }

  connectionEvicted(): void {
    this.evictedConnections.inc();
  }

  liveClientOpened(): void {
    this.liveClients.inc();
  }

  liveClientClosed(reason: string): void {
    this.liveClients.dec();
    this.liveDisconnects.inc({ reason });
  }

  recordCommit(stats: CommitStats): void {
    this.appendedEvents.inc(stats.events);
    this.commitEvents.observe(stats.events);
    this.commitSeconds.observe(stats.durationMs / 1_000);
  }

  toolCallCompleted(outcome: string): void {
    this.toolCallsCompleted.inc({ outcome });
  }

  recordToolCallStep(step: 'review' | 'execute', durationMs: number): void {
    this.toolCallStepSeconds.observe({ step }, durationMs / 1_000);
  }

  upstreamAttempt(upstream: string, key: string, outcome: string): void {
    this.upstreamAttempts.inc({ upstream, key, outcome });
  }

  upstreamKeyCooled(upstream: string, key: string, reason: string): void {
    this.upstreamCooldowns.inc({ upstream, key, reason });
  }

  /** Where the available-keys gauge reads from (the gateway's UpstreamPools). */
  watchUpstreamKeys(source: () => Iterable<{ upstream: string; available: number }>): void {
    this.upstreamKeysSource = source;
  }

  /** What the gateway could not record: events lost from answers, and records that failed (the service log says why). */
  readonly gatewayRecording = {
    unrecordedEvents: (count: number) => this.unrecordedEvents.inc(count),
    recordingFailed: (_error: unknown) => this.recordingFailures.inc(),
  };
}
