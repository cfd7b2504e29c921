import {
  evolveToolCall,
  initialToolCallState,
  parseToolCallStreamId,
  rememberNewest,
  TOOLCALL_STREAM_PREFIX,
  type ToolCallState,
} from '#core';
import type { EventLogReader, ProjectionEvent } from '#event-log';
import type { ProjectionDefinition } from '../../projections/projection.js';
import { loadToolCall, type ToolCallRef } from '../toolcall-repository.js';

const MAX_KEPT_CALLS = 5_000;

interface FoldedCall {
  readonly state: ToolCallState;
  readonly requestedAt: string;
  /** Log position of the request: lists are ordered by it. */
  readonly requestedPosition: string;
  readonly revision: bigint;
}

/** The runner of the tool-call projection, for reads that wait for it (`?minPosition`). */
export const TOOL_CALLS_RUNNER = Symbol('TOOL_CALLS_RUNNER');

/** The tables the tool-call projection owns (rebuilt and swapped together). */
export const TOOL_CALL_TABLES = ['tool_calls'] as const;

/**
 * One row per tool call with its verdicts, decision and execution, folded from its stream with
 * the core's `evolveToolCall`. Each call touched by a batch is folded forward from the state kept
 * for it, or from nothing for a batch that starts its stream (read from its stream when none is
 * kept: after a restart, or for a call not seen lately)
 * up to the batch's last event, and written once, guarded by position.
 * Nothing here asks the firewall, the guardian, a person or an MCP server: it only reads events.
 */
export function toolCallsProjection(): ProjectionDefinition<ProjectionEvent> {
  const calls = new Map<string, FoldedCall>();
  return {
    name: 'tool-calls',
    version: 1,
    filter: { streamPrefixes: [TOOLCALL_STREAM_PREFIX] },
    reset: () => calls.clear(),
    async writes(events, { eventLog }) {
      const byCall = new Map<string, ProjectionEvent[]>();
      for (const event of events) {
        const own = byCall.get(event.streamId);
        if (own) own.push(event);
        else byCall.set(event.streamId, [event]);
      }
      const rows: object[] = [];
      for (const [streamId, own] of byCall) {
        const { tenant, id: toolCallId } = parseToolCallStreamId(streamId)!;
        const last = own.at(-1)!;
        const kept = calls.get(streamId);
        // Folded forward from the kept state when it ends right before this batch, or from nothing when
        // the batch starts the stream; otherwise read from the stream.
        const folded =
          kept && kept.revision === own[0].revision - 1n
            ? { ...kept, state: own.reduce(evolveToolCall, kept.state) }
            : foldedFrom(own[0].revision === 0n ? own : await readUpTo(eventLog, { tenant, toolCallId }, last));
        rememberNewest(calls, streamId, { ...folded, revision: last.revision }, MAX_KEPT_CALLS);
        const { state, requestedAt, requestedPosition } = folded;
        if (state.status === 'absent') continue;
        const { request } = state;
        rows.push({
          tenant,
          id: toolCallId,
          session_id: request.sessionId,
          message_id: request.messageId,
          tool_id: request.toolId,
          server: request.tool.server,
          tool_name: request.tool.name,
          arguments: request.arguments ?? null,
          arguments_sha256: request.argumentsSha256,
          requested_by: request.requestedBy,
          status: state.status,
          outcome: state.outcome,
          firewall: state.firewall,
          guardian: state.guardian,
          approval: state.approval,
          decision: state.decision,
          execution: state.execution,
          requested_at: requestedAt,
          requested_position: requestedPosition,
          updated_at: last.metadata.recordedAt,
          position: last.position.toString(),
        });
      }
      if (rows.length === 0) return undefined;
      return {
        name: 'tool-calls-write',
        text: `INSERT INTO tool_calls (tenant, id, session_id, message_id, tool_id, server, tool_name, arguments,
          arguments_sha256, requested_by, status, outcome, firewall, guardian, approval, decision, execution,
          requested_at, requested_position, updated_at, position)
         SELECT * FROM jsonb_to_recordset($1::jsonb) AS r(tenant text, id text, session_id text, message_id text,
           tool_id text, server text, tool_name text, arguments jsonb, arguments_sha256 text,
           requested_by text, status text, outcome text, firewall jsonb, guardian jsonb, approval jsonb,
           decision jsonb, execution jsonb, requested_at timestamptz, requested_position bigint, updated_at timestamptz,
           position bigint)
         ON CONFLICT (tenant, id) DO UPDATE SET status = excluded.status, outcome = excluded.outcome,
           firewall = excluded.firewall, guardian = excluded.guardian, approval = excluded.approval,
           decision = excluded.decision, execution = excluded.execution, updated_at = excluded.updated_at,
             position = excluded.position
         WHERE tool_calls.position <= excluded.position`,
        values: [JSON.stringify(rows)],
      };
    },
  };
}

/** A call's events up to `last`, read from its stream (after a restart, or for a call not seen lately). */
async function readUpTo(eventLog: EventLogReader, ref: ToolCallRef, last: ProjectionEvent) {
  return (await loadToolCall(eventLog, ref, Number(last.revision) + 1)).events;
}

/** A call folded from its stream's first events (its request first). */
function foldedFrom(events: readonly ProjectionEvent[]): Omit<FoldedCall, 'revision'> {
  const [request] = events;
  return {
    state: events.reduce(evolveToolCall, initialToolCallState),
    requestedAt: request.metadata.recordedAt,
    requestedPosition: request.position.toString(),
  };
}
