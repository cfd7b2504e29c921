import type { CommandBus, EventBus } from '@nestjs/cqrs';
import { parseToolCallStreamId } from '#core';
import type { Pool } from 'pg';
import type { ProjectionDefinition } from '../projections/projection.js';
import { AdvanceToolCallCommand, governedRequests, LogEventRead } from './governance-saga.js';
import type { GovernanceParts } from './governance-parts.js';
import type { GovernedRequest } from './tool-call-processor.js';

/**
 * The saga's durable input: a checkpointed consumer of the log (run by a `ProjectionRunner`,
 * so one instance leads it). In the transaction that moves its checkpoint it keeps the saga
 * store — every call it has seen requested and not yet seen completed, with the request that
 * starts it. Each event goes to the `@nestjs/cqrs` saga as its batch arrives, before that
 * transaction. When an instance takes the lead (first start, restart, failover) it resumes every
 * call in the store from its stream.
 */
export function governanceSagaConsumer(
  parts: GovernanceParts,
  eventBus: EventBus,
  commandBus: CommandBus,
  pool: Pool,
): ProjectionDefinition {
  const executor = parts.executor;
  const serves = (server: string, tenant: string) => executor?.serves(server, tenant) ?? false;
  return {
    name: 'governance-saga',
    version: 1,
    filter: { eventTypePrefixes: ['chunk.mcp_tool_pending', 'toolcall.'] },
    reset: () => undefined,
    async resume() {
      const { rows } = await pool.query<{ tool_call_id: string; request: GovernedRequest }>(
        'SELECT tool_call_id, request FROM governance_saga_open ORDER BY opened_at',
      );
      for (const { tool_call_id: toolCallId, request } of rows)
        void commandBus.execute(new AdvanceToolCallCommand({ tenant: request.tenant, toolCallId }, request));
    },
    // The saga hears of a request or a step as soon as the log has it, not after the transaction below:
    // the store it keeps there is only what a new leader resumes from.
    react(events) {
      for (const event of events) eventBus.publish(new LogEventRead(event, governedRequests(event, serves)));
    },
    // The store changes only when a call is requested (in a session's chunk) or completed.
    writesFor: (event) => event.type === 'chunk.mcp_tool_pending' || event.type === 'toolcall.completed',
    // Opened and completed in one statement, which sees the store as it was before it: a call completed in the
    // batch that requests it is never opened.
    writes(events) {
      const completed = new Set(
        events
          .filter((event) => event.type === 'toolcall.completed')
          .map((event) => parseToolCallStreamId(event.streamId)!.id),
      );
      const opened = events
        .flatMap((event) => governedRequests(event, serves))
        .filter((request) => !completed.has(request.toolCallId));
      if (opened.length === 0 && completed.size === 0) return Promise.resolve(undefined);
      return Promise.resolve({
        name: 'governance-saga-store',
        text: `WITH opened AS (
            INSERT INTO governance_saga_open (tool_call_id, request)
            SELECT r.id, r.request FROM jsonb_to_recordset($1::jsonb) AS r(id text, request jsonb)
            ON CONFLICT (tool_call_id) DO NOTHING)
          DELETE FROM governance_saga_open WHERE tool_call_id = ANY($2::text[])`,
        values: [JSON.stringify(opened.map((request) => ({ id: request.toolCallId, request }))), [...completed]],
      });
    },
  };
}
