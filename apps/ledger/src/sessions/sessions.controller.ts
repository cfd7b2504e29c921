import { randomUUID } from 'node:crypto';
import { Body, Controller, Get, HttpCode, Inject, Param, Post, Query, Req } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import { parseChunks, sessionStreamId, type SessionCommand, type SessionState } from '#core';
import { ANONYMOUS_ACTOR, DEFAULT_TENANT, type EventLog } from '#event-log';
import type { Request } from 'express';
import { EVENT_LOG } from '../event-log/event-log.module.js';
import { ApiError } from '../http/api-error.js';
import { createMessageBody, createSessionBody, pageQuery, positionQuery } from './request-schemas.js';
import { ExecuteSessionCommand } from './session-command.handler.js';
import { SessionQueries } from './session-queries.js';
import type { CommandOutcome } from './session-repository.js';
import { SessionRepository } from './session-repository.js';
import { foldedMessageView, sessionView } from './session-views.js';

/** Thin: each route validates its input, builds a command or a query, and returns the result. */
@Controller('v1/sessions')
export class SessionsController {
  constructor(
    private readonly commandBus: CommandBus,
    private readonly sessions: SessionRepository,
    private readonly queries: SessionQueries,
    @Inject(EVENT_LOG) private readonly eventLog: EventLog,
  ) {}

  @Post()
  @HttpCode(201)
  async open(@Body() body: unknown) {
    const input = createSessionBody.parse(body ?? {});
    const id = input.id ?? randomUUID();
    await this.run(id, { type: 'open_session', sessionId: id, title: input.title ?? null, metadata: input.metadata ?? {} });
    return { id };
  }

  @Post(':sid/messages')
  @HttpCode(201)
  async createMessage(@Param('sid') sessionId: string, @Body() body: unknown) {
    const input = createMessageBody.parse(body ?? {});
    const id = input.id ?? randomUUID();
    const { decision } = await this.run(sessionId, { type: 'create_message', messageId: id, role: input.role, parentId: input.parentId, model: input.model ?? null, content: input.content ?? null });
    return { id, parentId: decision.parentId ?? null };
  }

  @Post(':sid/messages/:mid/chunks')
  @HttpCode(200)
  async appendChunks(@Param('sid') sessionId: string, @Param('mid') messageId: string, @Query('dialect') dialect: string | undefined, @Req() request: Request) {
    if (dialect !== undefined && dialect !== 'cherry') throw new ApiError(400, 'unsupported_dialect', `dialect ${JSON.stringify(dialect)} is not supported yet; use cherry`, 'dialect');
    const chunks = parseChunks(chunkValues(request.body));
    const { decision, position } = await this.run(sessionId, { type: 'append_chunks', messageId, chunks });
    return { appended: decision.events.length, duplicates: decision.duplicateSeqs.length, position: Number(position) };
  }

  /** From the read models; `?minPosition=` waits for them to reach a write; `?at=` folds the log as of a position instead. */
  @Get(':sid')
  async read(@Param('sid') sessionId: string, @Query('at') at: string | undefined, @Query('minPosition') minPosition: string | undefined) {
    if (at === undefined) return this.queries.session(sessionId, queryPosition('minPosition', minPosition));
    return sessionView(openOr404(await this.sessions.loadAt(sessionId, queryPosition('at', at)!)));
  }

  @Get(':sid/messages/:mid')
  async readMessage(@Param('sid') sessionId: string, @Param('mid') messageId: string, @Query('at') at: string | undefined, @Query('minPosition') minPosition: string | undefined) {
    if (at === undefined) return this.queries.message(sessionId, messageId, queryPosition('minPosition', minPosition));
    const session = openOr404(await this.sessions.loadAt(sessionId, queryPosition('at', at)!));
    const message = session.messages.get(messageId);
    if (!message) throw new ApiError(404, 'message_not_found', `message ${messageId} is not in this session`);
    return foldedMessageView(message);
  }

  @Get(':sid/events')
  async events(@Param('sid') sessionId: string, @Query() query: unknown) {
    const { from, limit } = pageQuery.parse(query);
    const events = (await this.eventLog.readStream(sessionStreamId(sessionId))).filter((event) => event.position > from);
    if (events.length === 0 && (await this.sessions.load(sessionId)).status !== 'open') throw new ApiError(404, 'session_not_found', 'no such session');
    const page = events.slice(0, limit);
    return {
      events: page.map((event) => ({ ...event, revision: Number(event.revision), position: Number(event.position) })),
      next: events.length > limit ? Number(page.at(-1)!.position) : null,
    };
  }

  private run(sessionId: string, command: SessionCommand): Promise<CommandOutcome> {
    return this.commandBus.execute(new ExecuteSessionCommand(sessionId, command, ANONYMOUS_ACTOR, DEFAULT_TENANT));
  }
}

/** The chunk batch from a JSON array or an NDJSON body; a malformed line is named by its number. */
function chunkValues(body: unknown): unknown[] {
  if (Array.isArray(body)) {
    if (body.length === 0) throw new ApiError(400, 'empty_batch', 'the batch holds no chunk', '(body)');
    return body;
  }
  if (typeof body === 'string') {
    const lines = body.split('\n');
    const values = lines.flatMap((line, index) => {
      if (line.trim() === '') return [];
      try {
        return [JSON.parse(line) as unknown];
      } catch {
        throw new ApiError(400, 'malformed_ndjson', `line ${index + 1} is not valid JSON`, `line ${index + 1}`);
      }
    });
    if (values.length === 0) throw new ApiError(400, 'empty_batch', 'the batch holds no chunk', '(body)');
    return values;
  }
  throw new ApiError(400, 'invalid_body', 'send a JSON array of chunks (application/json) or one chunk per line (application/x-ndjson)', '(body)');
}

function queryPosition(name: string, value: string | undefined): bigint | undefined {
  if (value === undefined) return undefined;
  const parsed = positionQuery.safeParse(value);
  if (!parsed.success) throw new ApiError(400, 'invalid_query', `${name} must be a log position (a non-negative integer)`, name);
  return parsed.data;
}

function openOr404(state: SessionState): Extract<SessionState, { status: 'open' }> {
  if (state.status !== 'open') throw new ApiError(404, 'session_not_found', 'no such session');
  return state;
}
