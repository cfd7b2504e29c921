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

  constructor() {
    collectDefaultMetrics({ register: this.registry });
  }

  requestRefused(status: number, reason: string): void {
    this.refusedRequests.inc({ status: String(status), reason });
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
}
