import { CommandHandler, type ICommandHandler } from '@nestjs/cqrs';
import type { SessionCommand } from '#core';
import { SessionRepository, type CommandOutcome } from './session-repository.js';

/**
 * The one command the CommandBus carries for sessions: an envelope around plain command data,
 * routed on the data's `type` by the decider, never on a class name.
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
