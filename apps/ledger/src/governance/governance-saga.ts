import { Injectable } from '@nestjs/common';
import { CommandHandler, ofType, Saga, type ICommand, type ICommandHandler, type IEvent } from '@nestjs/cqrs';
import {
  canonicalJson,
  governedToolCallId,
  parseSessionStreamId,
  parseToolCallStreamId,
  sha256Hex,
  type ChunkEventData,
  type McpToolResponse,
} from '#core';
import type { RecordedEvent } from '#event-log';
import { Logger } from 'nestjs-pino';
import { catchError, defer, EMPTY, from, mergeMap, type Observable } from 'rxjs';
import { ToolCallProcessor, type GovernedRequest } from './tool-call-processor.js';
import type { ToolCallRef } from './toolcall-repository.js';

/** A log event the saga consumer read (after its checkpoint), with the tool calls it asks the ledger to govern, handed to the sagas on the EventBus. */
export class LogEventRead implements IEvent {
  constructor(
    readonly event: RecordedEvent,
    readonly requests: readonly GovernedRequest[],
  ) {}
}

/** Move one tool call on; `request` starts it when its stream does not exist yet; `position` is the call's event that prompted it. */
export class AdvanceToolCallCommand implements ICommand {
  constructor(
    readonly toolCall: ToolCallRef,
    readonly request?: GovernedRequest,
    readonly position?: bigint,
  ) {}
}

/**
 * The tool calls a log event asks the ledger to govern: each `pending` response of an
 * `mcp_tool_pending` chunk whose server (`tool.serverName`, else `tool.serverId`) is one the
 * ledger is configured to execute for the session's tenant. The arguments' SHA-256 is what a reviewer's decision names.
 */
export function governedRequests(
  event: RecordedEvent,
  serves: (server: string, tenant: string) => boolean,
): GovernedRequest[] {
  if (event.type !== 'chunk.mcp_tool_pending') return [];
  const { tenant, id: sessionId } = parseSessionStreamId(event.streamId)!;
  const { messageId, responses } = event.data as ChunkEventData & { responses: readonly McpToolResponse[] };
  return responses.flatMap((response) => {
    const server = serverOf(response);
    if (response.status !== 'pending' || server === undefined || !serves(server, tenant)) return [];
    const args = response.arguments ?? {};
    return [
      {
        toolCallId: governedToolCallId(tenant, sessionId, messageId, response.id),
        sessionId,
        messageId,
        toolId: response.id,
        tool: { server, name: response.tool.name },
        arguments: args,
        argumentsSha256: sha256Hex(canonicalJson(args)),
        requestedBy: event.metadata.actor,
        tenant,
        causationId: event.id,
      },
    ];
  });
}

function serverOf({ tool }: McpToolResponse): string | undefined {
  const { serverName, serverId } = tool as { serverName?: unknown; serverId?: unknown };
  return typeof serverName === 'string' ? serverName : typeof serverId === 'string' ? serverId : undefined;
}

/**
 * The governance saga as `@nestjs/cqrs` sees it: log events in, commands out. Its input is the
 * durable consumer's (`governance-saga.consumer.ts`), never events the process raised itself.
 * An error inside an rxjs saga pipe would end the saga for good, so each event is mapped in its
 * own inner pipe that swallows (and logs) its failure.
 */
@Injectable()
export class GovernanceSaga {
  constructor(private readonly logger: Logger) {}

  @Saga()
  toolCalls = (events$: Observable<IEvent>): Observable<ICommand> =>
    events$.pipe(
      ofType(LogEventRead),
      mergeMap(({ event, requests }) =>
        defer(() => from(commandsFor(event, requests))).pipe(
          catchError((error: unknown) => {
            this.logger.error({ err: error, eventId: event.id }, 'governance saga could not map an event');
            return EMPTY;
          }),
        ),
      ),
    );
}

function commandsFor(event: RecordedEvent, requests: readonly GovernedRequest[]): AdvanceToolCallCommand[] {
  const toolCall = parseToolCallStreamId(event.streamId);
  if (toolCall)
    return [
      new AdvanceToolCallCommand({ tenant: toolCall.tenant, toolCallId: toolCall.id }, undefined, event.position),
    ];
  return requests.map(
    (request) => new AdvanceToolCallCommand({ tenant: request.tenant, toolCallId: request.toolCallId }, request),
  );
}

@CommandHandler(AdvanceToolCallCommand)
export class AdvanceToolCallHandler implements ICommandHandler<AdvanceToolCallCommand, void> {
  constructor(private readonly processor: ToolCallProcessor) {}

  execute({ toolCall, request, position }: AdvanceToolCallCommand): Promise<void> {
    return this.processor.advance(toolCall, request, position);
  }
}
