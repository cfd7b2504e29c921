import { randomUUID } from 'node:crypto';
import { Body, Controller, Get, HttpCode, Inject, Param, Post, Query } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import { decodedExecution, storableJson, type ToolCallState } from '#core';
import type pg from 'pg';
import { z } from 'zod';
import { PG_POOL } from '../database/pg-pool-token.js';
import { CurrentPrincipal } from '../identity/current-principal.js';
import type { Principal } from '../identity/principal.js';
import { ApiError } from '../http/api-error.js';
import { reachReadModels } from '../http/log-positions.js';
import { EVENT_LOG } from '../event-log/event-log-token.js';
import type { ProjectionRunner } from '../projections/projection-runner.js';
import { clientId, position } from '../sessions/request-schemas.js';
import { TOOL_CALLS_RUNNER } from './read-models/tool-calls.projection.js';
import type { EventLog } from '#event-log';
import { DecideToolCallCommand } from './decide-tool-call.handler.js';
import { ToolCallRepository } from './toolcall-repository.js';
import { toolCallView, trailView, type ToolCallView } from './tool-call-views.js';

const STATUSES = [
  'requested',
  'screened',
  'awaiting_approval',
  'ready',
  'executing',
  'succeeded',
  'failed',
  'denied',
  'completed',
] as const;

export const listQuery = z
  .object({
    state: z.enum(STATUSES).optional(),
    sessionId: clientId.optional(),
    limit: z.coerce.number().int().min(1).max(1_000).default(100),
    minPosition: position.optional(),
  })
  .strict();

export const decisionBody = storableJson(
  z
    .object({
      /** The SHA-256 of the arguments the reviewer was shown (the call's `argumentsSha256`). */
      argumentsSha256: z.string().regex(/^[0-9a-f]{64}$/, 'must be the 64 hex digits of a SHA-256'),
      comment: z.string().max(2_000).optional(),
    })
    .strict(),
);

/** The approval queue and the audit view; decisions go through the command bus to the call's decider. */
@Controller('v1/tool-calls')
export class ToolCallsController {
  constructor(
    private readonly commandBus: CommandBus,
    private readonly toolCalls: ToolCallRepository,
    @Inject(PG_POOL) private readonly pool: pg.Pool,
    @Inject(TOOL_CALLS_RUNNER) private readonly projection: ProjectionRunner,
    @Inject(EVENT_LOG) private readonly eventLog: EventLog,
  ) {}

  /**
   * From the `tool_calls` read model, in the order the calls were requested in the log (the
   * position of each call's first event): `?state=awaiting_approval` is the approval queue. `?minPosition`
   * waits (bounded) until the read model reflects that position.
   */
  @Get()
  async list(@Query() query: unknown, @CurrentPrincipal() principal: Principal) {
    const { state, sessionId, limit, minPosition } = listQuery.parse(query);
    await reachReadModels(this.projection, this.eventLog, minPosition, minPosition);
    const { rows } = await this.pool.query<ListedToolCall>(
      `SELECT id, session_id AS "sessionId", message_id AS "messageId", tool_id AS "toolId",
        json_build_object('server', server, 'name', tool_name) AS tool, arguments,
         arguments_sha256 AS "argumentsSha256", requested_by AS "requestedBy", status, outcome, firewall, guardian,
           approval, decision, execution, position::float8 AS position,
           requested_position::float8 AS "requestedPosition", requested_at AS "requestedAt"
       FROM tool_calls WHERE tenant = $4 AND ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR session_id = $2)
       ORDER BY requested_position, id LIMIT $3`,
      [state ?? null, sessionId ?? null, limit, principal.tenant],
    );
    return {
      toolCalls: rows.map((row) => ({
        ...row,
        execution: decodedExecution(row.execution),
        requestedAt: row.requestedAt.toISOString(),
      })),
    };
  }

  /** Folded from the call's stream, so it is current the moment a step is recorded; with the full event trail. */
  @Get(':id')
  async read(@Param('id') toolCallId: string, @CurrentPrincipal() principal: Principal) {
    const { state, events } = await this.toolCalls.load({ tenant: principal.tenant, toolCallId });
    const [requested] = events;
    return {
      ...toolCallView(found(state)),
      requestedPosition: Number(requested.position),
      requestedAt: requested.metadata.recordedAt,
      events: trailView(events),
    };
  }

  @Post(':id/approve')
  @HttpCode(200)
  approve(@Param('id') toolCallId: string, @Body() body: unknown, @CurrentPrincipal() principal: Principal) {
    return this.decide(toolCallId, true, body, principal);
  }

  @Post(':id/deny')
  @HttpCode(200)
  deny(@Param('id') toolCallId: string, @Body() body: unknown, @CurrentPrincipal() principal: Principal) {
    return this.decide(toolCallId, false, body, principal);
  }

  private async decide(toolCallId: string, approve: boolean, body: unknown, principal: Principal) {
    const { argumentsSha256, comment } = decisionBody.parse(body ?? {});
    const command = {
      type: 'decide' as const,
      approve,
      by: principal.actor,
      bySubject: principal.subject,
      comment: comment ?? null,
      argumentsSha256,
      at: new Date().toISOString(),
      eventId: randomUUID(),
    };
    const state: ToolCallState = await this.commandBus.execute(
      new DecideToolCallCommand({ tenant: principal.tenant, toolCallId }, command),
    );
    return toolCallView(found(state));
  }
}

type ListedToolCall = ToolCallView & { readonly requestedPosition: number; readonly requestedAt: Date };

function found(state: ToolCallState): Exclude<ToolCallState, { status: 'absent' }> {
  if (state.status === 'absent') throw new ApiError(404, 'toolcall_not_found', 'no such tool call');
  return state;
}
