import { CommandHandler, type ICommandHandler } from '@nestjs/cqrs';
import type { ToolCallCommand, ToolCallState } from '#core';
import { ToolCallRepository } from './toolcall-repository.js';

/** A person's decision on a call awaiting approval; the decider enforces first-wins, the arguments hash and the requester rule. */
export class DecideToolCallCommand {
  constructor(
    readonly toolCallId: string,
    readonly decision: Extract<ToolCallCommand, { type: 'decide' }>,
  ) {}
}

@CommandHandler(DecideToolCallCommand)
export class DecideToolCallHandler implements ICommandHandler<DecideToolCallCommand, ToolCallState> {
  constructor(private readonly toolCalls: ToolCallRepository) {}

  execute({ toolCallId, decision }: DecideToolCallCommand): Promise<ToolCallState> {
    return this.toolCalls.execute(toolCallId, decision, { actor: decision.by });
  }
}
