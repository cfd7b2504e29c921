import { decodedExecution, type ToolCallState } from '#core';
import type { RecordedEvent } from '#event-log';

/**
 * A tool call as the API shows it: the request, every verdict and decision, the execution (its
 * result as it came, however it is stored), and the log position it reflects.
 */
export interface ToolCallView {
  readonly id: string;
  readonly sessionId: string;
  readonly messageId: string;
  readonly toolId: string;
  readonly tool: { readonly server: string; readonly name: string };
  readonly arguments: unknown;
  readonly argumentsSha256: string;
  readonly requestedBy: string;
  readonly status: string;
  readonly outcome: string | null;
  readonly firewall: unknown;
  readonly guardian: unknown;
  readonly approval: unknown;
  readonly decision: unknown;
  readonly execution: unknown;
  readonly position: number;
}

export function toolCallView(state: Exclude<ToolCallState, { status: 'absent' }>): ToolCallView {
  const { request } = state;
  return {
    id: request.toolCallId,
    sessionId: request.sessionId,
    messageId: request.messageId,
    toolId: request.toolId,
    tool: request.tool,
    arguments: request.arguments,
    argumentsSha256: request.argumentsSha256,
    requestedBy: request.requestedBy,
    status: state.status,
    outcome: state.outcome,
    firewall: state.firewall,
    guardian: state.guardian,
    approval: state.approval,
    decision: state.decision,
    execution: decodedExecution(state.execution),
    position: Number(state.position),
  };
}

/** The audit trail: every event of the call's stream with who recorded it, when, and its hash link. */
export function trailView(events: readonly RecordedEvent[]) {
  return events.map((event) => ({
    id: event.id,
    type: event.type,
    data: event.data,
    revision: Number(event.revision),
    position: Number(event.position),
    actor: event.metadata.actor,
    recordedAt: event.metadata.recordedAt,
    causationId: event.metadata.causationId,
    prevHash: event.metadata.prevHash,
    hash: event.metadata.hash,
  }));
}
