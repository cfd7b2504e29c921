import { parseToolCallStreamId, TOOLCALL_STREAM_PREFIX } from '#core';
import type { RecordedEvent } from '#event-log';
import type { ProjectionDefinition } from '../../projections/projection.js';
import { loadToolCall } from '../toolcall-repository.js';

/** The tables the tool-call projection owns (rebuilt and swapped together). */
export const TOOL_CALL_TABLES = ['tool_calls'] as const;

/**
 * One row per tool call with its verdicts, decision and execution, folded from its stream with
 * the core's `evolveToolCall`. Calls are short streams: each call touched by a batch is folded
 * from its first event up to the batch's last one, and written once, guarded by position.
 * Nothing here asks the firewall, the guardian, a person or an MCP server: it only reads events.
 */
export function toolCallsProjection(): ProjectionDefinition {
  return {
    name: 'tool-calls',
    version: 1,
    filter: { streamPrefixes: [TOOLCALL_STREAM_PREFIX] },
    reset: () => undefined,
    async handle(events, { client, eventLog }) {
      const lastByCall = new Map<string, RecordedEvent>();
      for (const event of events) lastByCall.set(event.streamId, event);
      const rows: object[] = [];
      for (const [streamId, last] of lastByCall) {
        const { tenant, id: toolCallId } = parseToolCallStreamId(streamId)!;
        const { state, events: stream } = await loadToolCall(
          eventLog,
          { tenant, toolCallId },
          Number(last.revision) + 1,
        );
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
          requested_at: stream[0].metadata.recordedAt,
          requested_position: stream[0].position.toString(),
          updated_at: last.metadata.recordedAt,
          position: last.position.toString(),
        });
      }
      if (rows.length === 0) return;
      await client.query(
        `INSERT INTO tool_calls (tenant, id, session_id, message_id, tool_id, server, tool_name, arguments,
          arguments_sha256, requested_by, status, outcome, firewall, guardian, approval, decision, execution,
          requested_at, requested_position, updated_at, position)
         SELECT * FROM jsonb_to_recordset($1::jsonb) AS r(tenant text, id text, session_id text, message_id text,
           tool_id text, server text, tool_name text, arguments jsonb, arguments_sha256 text,
           requested_by text, status text, outcome text, firewall jsonb, guardian jsonb, approval jsonb,
           decision jsonb, execution jsonb, requested_at timestamptz, requested_position bigint,
           updated_at timestamptz, position bigint)
         ON CONFLICT (tenant, id) DO UPDATE SET status = excluded.status, outcome = excluded.outcome,
           firewall = excluded.firewall, guardian = excluded.guardian, approval = excluded.approval,
           decision = excluded.decision, execution = excluded.execution, updated_at = excluded.updated_at,
             position = excluded.position
         WHERE tool_calls.position <= excluded.position`,
        [JSON.stringify(rows)],
      );
    },
  };
}
