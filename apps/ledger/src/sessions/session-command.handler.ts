import { Inject } from '@nestjs/common';
import { CommandHandler, type ICommandHandler } from '@nestjs/cqrs';
import { mayWrite, SessionError, type SessionCommand } from '#core';
import type { EventLogReader, StreamAppend } from '#event-log';
import { EVENT_LOG } from '../event-log/event-log-token.js';
import { refuseBeyondHead } from '../http/log-positions.js';
import { SessionRepository, type CommandOutcome, type SessionAuthor, type SessionRef } from './session-repository.js';

/**
 * The commands the CommandBus carries for sessions: envelopes around plain command data, routed
 * on the data's `type` by the decider, never on a class name.
 */
export class ExecuteSessionCommand {
  constructor(
    readonly session: SessionRef,
    readonly command: SessionCommand,
    readonly author: SessionAuthor,
    /** Other streams' parts to store in the command's own append (see `SessionRepository.execute`). */
    readonly alongside?: readonly StreamAppend[],
  ) {}
}

@CommandHandler(ExecuteSessionCommand)
export class SessionCommandHandler implements ICommandHandler<ExecuteSessionCommand, CommandOutcome> {
  constructor(private readonly sessions: SessionRepository) {}

  execute({ session, command, author, alongside }: ExecuteSessionCommand): Promise<CommandOutcome> {
    return this.sessions.execute(session, command, author, alongside);
  }
}

export interface ForkRequest {
  readonly forkId: string;
  readonly sourceSessionId: string;
  /** `undefined`: the source as it is now. */
  readonly atPosition: bigint | undefined;
  readonly messageId: string | null;
  readonly title: string | null;
  readonly metadata: Readonly<Record<string, unknown>> | null;
  readonly writers: readonly string[];
}

/** A fork is decided on the source's state at the fork position, which is loaded first and handed to the decider as data. */
export class ForkSessionCommand {
  constructor(
    readonly tenant: string,
    readonly request: ForkRequest,
    readonly author: SessionAuthor & { readonly subject: string },
  ) {}
}

@CommandHandler(ForkSessionCommand)
export class ForkSessionHandler implements ICommandHandler<ForkSessionCommand, CommandOutcome> {
  constructor(
    private readonly sessions: SessionRepository,
    @Inject(EVENT_LOG) private readonly eventLog: EventLogReader,
  ) {}

  async execute({ tenant, request, author }: ForkSessionCommand): Promise<CommandOutcome> {
    const { forkId, sourceSessionId, atPosition, messageId, title, metadata, writers } = request;
    // Beyond the head, the source's state at that position could still change: a fork must be fixed.
    await refuseBeyondHead(this.eventLog, atPosition, 'atPosition');
    const sourceRef = { tenant, sessionId: sourceSessionId };
    const current = await this.sessions.load(sourceRef);
    // Forking continues someone's session under a new id: it takes the right to write to the source.
    if (current.status === 'open' && !mayWrite(current, author.subject))
      throw new SessionError('not_a_writer', 'this credential may not fork this session');
    const source = atPosition === undefined ? current : await this.sessions.loadAt(sourceRef, atPosition, 'decide');
    const command = {
      type: 'fork_session' as const,
      sessionId: forkId,
      sourceSessionId,
      source,
      messageId,
      title,
      metadata,
      owner: author.subject,
      writers,
    };
    return this.sessions.execute({ tenant, sessionId: forkId }, command, author);
  }
}
