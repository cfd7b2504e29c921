import { randomUUID } from 'node:crypto';
import { Body, Controller, Get, HttpCode, Inject, Param, Post, Put, Query, Req, Res } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import { DIALECT_NAMES, isDialectName, parseChunks, sessionStreamId, type SessionCommand } from '#core';
import { readStreamAfterPosition, type EventLog } from '#event-log';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { EVENT_LOG } from '../event-log/event-log-token.js';
import { CurrentPrincipal } from '../identity/current-principal.js';
import type { Principal } from '../identity/principal.js';
import { ApiError } from '../http/api-error.js';
import { refuseBeyondHead } from '../http/log-positions.js';
import { CredentialWrites } from './credential-writes.js';
import {
  createMessageBody,
  createSessionBody,
  dialectQuery,
  forkBody,
  grantBody,
  historyQuery,
  listSessionsQuery,
  pageQuery,
  readPointQuery,
  selectionBody,
  translationBody,
} from './request-schemas.js';
import { ExecuteSessionCommand, ForkSessionCommand } from './session-command.handler.js';
import { SessionList } from './session-list.js';
import { SessionQueries } from './session-queries.js';
import type { CommandOutcome } from './session-repository.js';
import { authorOf, SessionRepository } from './session-repository.js';
import { forkReference, historyView, sessionView, treeView } from './session-views.js';
import type { ReadPoint } from './session-queries.js';

/** Thin: each route validates its input, builds a command or a query, and returns the result. */
@Controller('v1/sessions')
export class SessionsController {
  constructor(
    private readonly commandBus: CommandBus,
    private readonly sessions: SessionRepository,
    private readonly queries: SessionQueries,
    private readonly list: SessionList,
    @Inject(EVENT_LOG) private readonly eventLog: EventLog,
    private readonly writes: CredentialWrites,
  ) {}

  /** `201` when opened; the same open again (same id and body) answers `200` with the original result. */
  @Post()
  @HttpCode(201)
  async open(
    @Body() body: unknown,
    @CurrentPrincipal() principal: Principal,
    @Res({ passthrough: true }) response: FastifyReply,
  ) {
    const input = createSessionBody.parse(body ?? {});
    const id = input.id ?? randomUUID();
    const command = {
      type: 'open_session' as const,
      sessionId: id,
      title: input.title ?? null,
      metadata: input.metadata ?? {},
      owner: principal.subject,
      writers: input.writers ?? [],
    };
    const { position } = created(response, await this.run(principal, id, command));
    return { id, position: Number(position) };
  }

  /** As `open`: a repeated create with the same id and body answers `200` with the original result. */
  @Post(':sid/messages')
  @HttpCode(201)
  async createMessage(
    @Param('sid') sessionId: string,
    @Body() body: unknown,
    @CurrentPrincipal() principal: Principal,
    @Res({ passthrough: true }) response: FastifyReply,
  ) {
    const input = createMessageBody.parse(body ?? {});
    const id = input.id ?? randomUUID();
    const command = {
      type: 'create_message' as const,
      messageId: id,
      role: input.role,
      parentId: input.parentId,
      model: input.model ?? null,
      content: input.content ?? null,
      attachments: input.attachments ?? [],
    };
    const { decision, position } = created(response, await this.run(principal, sessionId, command));
    return { id, parentId: decision.parentId ?? null, position: Number(position) };
  }

  /**
   * Cherry chunks (each with its `seq`), or with `?dialect=<a name in DIALECTS>&seq=N` a
   * provider's stream events, numbered by the producer from N on, translated into chunks (ADR 0015).
   */
  @Post(':sid/messages/:mid/chunks')
  @HttpCode(200)
  async appendChunks(
    @Param('sid') sessionId: string,
    @Param('mid') messageId: string,
    @Query() query: unknown,
    @Req() request: FastifyRequest,
    @CurrentPrincipal() principal: Principal,
  ) {
    const { dialect, seq } = dialectQuery.parse(query);
    if (dialect !== 'cherry' && !isDialectName(dialect)) {
      const rule = `dialect ${JSON.stringify(dialect)} is not supported; use cherry, ${DIALECT_NAMES.join(', ')}`;
      throw new ApiError(400, 'unsupported_dialect', rule, 'dialect');
    }
    const values = batchValues(request.body);
    if (dialect === 'cherry') {
      const chunks = parseChunks(values);
      return appended(await this.run(principal, sessionId, { type: 'append_chunks', messageId, chunks }));
    }
    if (seq === undefined) {
      const rule = `seq: the ${dialect} dialect needs ?seq=, the number of the first event in the body`;
      throw new ApiError(400, 'invalid_request', rule, 'seq');
    }
    const command = { type: 'append_dialect_events' as const, messageId, dialect, firstSeq: seq, events: values };
    return appended(await this.run(principal, sessionId, command));
  }

  /**
   * Opens a translation block on an assistant message; its content then comes as `translation.delta`
   * and `translation.complete` chunks on the message's chunk route, from `nextSeq` on. Never in the history.
   */
  @Post(':sid/messages/:mid/translations')
  @HttpCode(201)
  async openTranslation(
    @Param('sid') sessionId: string,
    @Param('mid') messageId: string,
    @Body() body: unknown,
    @CurrentPrincipal() principal: Principal,
  ) {
    const input = translationBody.parse(body ?? {});
    const blockId = `${messageId}-translation-${randomUUID()}`;
    const command = { type: 'open_translation' as const, messageId, blockId, eventId: randomUUID(), ...input };
    const { decision, position } = await this.run(principal, sessionId, command);
    return { id: blockId, messageId, nextSeq: decision.nextSeq, position: Number(position) };
  }

  @Post(':sid/fork')
  @HttpCode(201)
  async fork(
    @Param('sid') sourceSessionId: string,
    @Body() body: unknown,
    @Res({ passthrough: true }) response: FastifyReply,
    @CurrentPrincipal() principal: Principal,
  ) {
    const input = forkBody.parse(body ?? {});
    const forkId = input.id ?? randomUUID();
    const request = {
      forkId,
      sourceSessionId,
      atPosition: input.atPosition,
      messageId: input.messageId ?? null,
      title: input.title ?? null,
      metadata: input.metadata ?? null,
      writers: input.writers ?? [],
    };
    const { decision, position } = created(
      response,
      await this.commandBus.execute(new ForkSessionCommand(principal.tenant, request, authorOf(principal))),
    );
    this.writes.record(principal.credentialId, position);
    return { id: forkId, forkedFrom: forkReference(decision.forkedFrom!), position: Number(position) };
  }

  @Put(':sid/messages/:mid/selection')
  selectChild(
    @Param('sid') sessionId: string,
    @Param('mid') parentId: string,
    @Body() body: unknown,
    @CurrentPrincipal() principal: Principal,
  ) {
    return this.select(principal, sessionId, parentId, body);
  }

  @Put(':sid/selection')
  selectRoot(@Param('sid') sessionId: string, @Body() body: unknown, @CurrentPrincipal() principal: Principal) {
    return this.select(principal, sessionId, null, body);
  }

  /** The owner (or an admin) lets other subjects write: `{writers: [subject, …]}`, subjects as credentials carry them. */
  @Post(':sid/writers')
  @HttpCode(200)
  async grantWriters(@Param('sid') sessionId: string, @Body() body: unknown, @CurrentPrincipal() principal: Principal) {
    const { writers } = grantBody.parse(body ?? {});
    const { position } = await this.run(principal, sessionId, {
      type: 'grant_writers',
      writers,
      eventId: randomUUID(),
    });
    const session = await this.sessions.load({ tenant: principal.tenant, sessionId });
    return {
      owner: session.status === 'open' ? session.owner : null,
      writers: session.status === 'open' ? session.writers : [],
      position: Number(position),
    };
  }

  /** The tenant's sessions, newest activity first, filtered and searched; paged by `nextCursor`. */
  @Get()
  find(@Query() query: unknown, @CurrentPrincipal() principal: Principal) {
    return this.list.find(
      principal.tenant,
      listSessionsQuery.parse(query),
      this.writes.latestOf(principal.credentialId),
    );
  }

  /** The session with its active path; from the read models, or with `?at=` folded from the log as of that position. */
  @Get(':sid')
  read(@Param('sid') sessionId: string, @Query() query: unknown, @CurrentPrincipal() principal: Principal) {
    const point = this.readPoint(principal, readPointQuery.parse(query));
    return this.queries.withSession({ tenant: principal.tenant, sessionId }, point, sessionView);
  }

  @Get(':sid/tree')
  tree(@Param('sid') sessionId: string, @Query() query: unknown, @CurrentPrincipal() principal: Principal) {
    const point = this.readPoint(principal, readPointQuery.parse(query));
    return this.queries.withSession({ tenant: principal.tenant, sessionId }, point, treeView);
  }

  @Get(':sid/history')
  history(@Param('sid') sessionId: string, @Query() query: unknown, @CurrentPrincipal() principal: Principal) {
    const { format, includeThinking, ...requested } = historyQuery.parse(query);
    const point = this.readPoint(principal, requested);
    return this.queries.withSession({ tenant: principal.tenant, sessionId }, point, (snapshot) =>
      historyView(snapshot, format, includeThinking),
    );
  }

  @Get(':sid/messages/:mid')
  readMessage(
    @Param('sid') sessionId: string,
    @Param('mid') messageId: string,
    @Query() query: unknown,
    @CurrentPrincipal() principal: Principal,
  ) {
    const point = this.readPoint(principal, readPointQuery.parse(query));
    return this.queries.message({ tenant: principal.tenant, sessionId }, messageId, point);
  }

  @Get(':sid/events')
  async events(@Param('sid') sessionId: string, @Query() query: unknown, @CurrentPrincipal() principal: Principal) {
    const { from, limit } = pageQuery.parse(query);
    await refuseBeyondHead(this.eventLog, from, 'from');
    const session = { tenant: principal.tenant, sessionId };
    const events = await readStreamAfterPosition(
      this.eventLog,
      sessionStreamId(session.tenant, sessionId),
      from,
      limit + 1,
    );
    if (events.length === 0 && (await this.sessions.load(session)).status !== 'open')
      throw new ApiError(404, 'session_not_found', 'no such session');
    const page = events.slice(0, limit);
    return {
      events: page.map((event) => ({ ...event, revision: Number(event.revision), position: Number(event.position) })),
      next: events.length > limit ? Number(page.at(-1)!.position) : null,
    };
  }

  private async select(principal: Principal, sessionId: string, parentId: string | null, body: unknown) {
    const { childId } = selectionBody.parse(body ?? {});
    const { position } = await this.run(principal, sessionId, {
      type: 'select_branch',
      parentId,
      childId,
      eventId: randomUUID(),
    });
    return { parentId, childId, position: Number(position) };
  }

  /** Reads by a credential also wait for its own latest write on this instance (read-your-writes). */
  private readPoint(principal: Principal, requested: ReadPoint): ReadPoint {
    return { ...requested, ownWrite: this.writes.latestOf(principal.credentialId) };
  }

  private async run(principal: Principal, sessionId: string, command: SessionCommand): Promise<CommandOutcome> {
    const outcome: CommandOutcome = await this.commandBus.execute(
      new ExecuteSessionCommand({ tenant: principal.tenant, sessionId }, command, authorOf(principal)),
    );
    this.writes.record(principal.credentialId, outcome.position);
    return outcome;
  }
}

/** A repeated create is answered `200` with the position the first one got. */
function created(response: FastifyReply, outcome: CommandOutcome): CommandOutcome {
  const { repeatOf } = outcome.decision;
  if (repeatOf === undefined) return outcome;
  void response.status(200);
  return { ...outcome, position: repeatOf.position };
}

/** `ignored`: chunks recorded that changed nothing on the message, with the reason (the log keeps them all). */
function appended({ decision, position }: CommandOutcome) {
  return {
    appended: decision.events.length,
    duplicates: decision.duplicateSeqs.length,
    ignored: decision.ignored ?? [],
    position: Number(position),
  };
}

/**
 * The batch from a JSON array or an NDJSON body; a malformed line is named by its number. A bare
 * `[DONE]` line (the end of an OpenAI stream, as its SSE `data:` carries it) is the string "[DONE]".
 */
function batchValues(body: unknown): unknown[] {
  if (Array.isArray(body)) {
    if (body.length === 0) throw new ApiError(400, 'empty_batch', 'the batch holds no chunk', '(body)');
    return body;
  }
  if (typeof body === 'string') {
    const lines = body.split('\n');
    const values = lines.flatMap((line, index) => {
      if (line.trim() === '') return [];
      if (line.trim() === '[DONE]') return ['[DONE]'];
      try {
        return [JSON.parse(line) as unknown];
      } catch {
        throw new ApiError(400, 'malformed_ndjson', `line ${index + 1} is not valid JSON`, `line ${index + 1}`);
      }
    });
    if (values.length === 0) throw new ApiError(400, 'empty_batch', 'the batch holds no chunk', '(body)');
    return values;
  }
  throw new ApiError(
    400,
    'invalid_body',
    'send a JSON array of chunks (application/json) or one chunk per line (application/x-ndjson)',
    '(body)',
  );
}
