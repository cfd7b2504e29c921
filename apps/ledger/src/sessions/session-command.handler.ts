import { Inject } from '@nestjs/common';
import { CommandHandler, type ICommandHandler } from '@nestjs/cqrs';
import type { SessionCommand } from '#core';
import type { EventLogReader } from '#event-log';
import { EVENT_LOG } from '../event-log/event-log.module.js';
import { ApiError } from '../http/api-error.js';
import { SessionRepository, type CommandOutcome } from './session-repository.js';

/**
 * The commands the CommandBus carries for sessions: envelopes around plain command data, routed
 * on the data's `type` by the decider, never on a class name.
 */
export class ExecuteSessionCommand {
  constructor(
    readonly sessionId: string,
    readonly command: SessionCommand,
    readonly actor: string,
    readonly tenant: string,
  ) {}
}

@CommandHandler(ExecuteSessionCommand)
export class SessionCommandHandler implements ICommandHandler<ExecuteSessionCommand, CommandOutcome> {
  constructor(private readonly sessions: SessionRepository) {}

  execute({ sessionId, command, actor, tenant }: ExecuteSessionCommand): Promise<CommandOutcome> {
    return this.sessions.execute(sessionId, command, actor, tenant);
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
}

/** A fork is decided on the source's state at the fork position, which is loaded first and handed to the decider as data. */
export class ForkSessionCommand {
  constructor(
    readonly request: ForkRequest,
    readonly actor: string,
    readonly tenant: string,
  ) {}
}

@CommandHandler(ForkSessionCommand)
export class ForkSessionHandler implements ICommandHandler<ForkSessionCommand, CommandOutcome> {
  constructor(
    private readonly sessions: SessionRepository,
    @Inject(EVENT_LOG) private readonly eventLog: EventLogReader,
  ) {}

  async execute({ request, actor, tenant }: ForkSessionCommand): Promise<CommandOutcome> {
    const { forkId, sourceSessionId, atPosition, messageId, title, metadata } = request;
    // Beyond the head, the source's state at that position could still change: a fork must be fixed.
    if (atPosition !== undefined && atPosition > (await this.eventLog.headPosition())) {
      throw new ApiError(422, 'position_beyond_head', `atPosition ${atPosition} is beyond the log's last event`, 'atPosition');
    }
    const source = atPosition === undefined ? await this.sessions.load(sourceSessionId) : await this.sessions.loadAt(sourceSessionId, atPosition);
    return this.sessions.execute(forkId, { type: 'fork_session', sessionId: forkId, sourceSessionId, source, messageId, title, metadata }, actor, tenant);
  }
}
