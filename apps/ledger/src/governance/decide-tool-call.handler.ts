import { CommandHandler, type ICommandHandler } from '@nestjs/cqrs';
import type { ToolCallCommand, ToolCallState } from '#core';
import { ApiKeyStore } from '../identity/api-key-store.js';
import { ToolCallRepository, type ToolCallRef } from './toolcall-repository.js';

/** A person's decision on a call awaiting approval; the decider enforces first-wins, the arguments hash and separation of duties. */
export class DecideToolCallCommand {
  constructor(
    readonly toolCall: ToolCallRef,
    readonly decision: Omit<Extract<ToolCallCommand, { type: 'decide' }>, 'requesterSubject'>,
  ) {}
}

@CommandHandler(DecideToolCallCommand)
export class DecideToolCallHandler implements ICommandHandler<DecideToolCallCommand, ToolCallState> {
  constructor(
    private readonly toolCalls: ToolCallRepository,
    private readonly keys: ApiKeyStore,
  ) {}

  async execute({ toolCall, decision }: DecideToolCallCommand): Promise<ToolCallState> {
    const { state } = await this.toolCalls.load(toolCall);
    // The requester is known by the actor on its chunk; the rule compares the subjects behind both credentials.
    const requesterSubject = state.status === 'absent' ? '' : await this.keys.subjectOfActor(state.request.requestedBy);
    return this.toolCalls.execute(toolCall, { ...decision, requesterSubject }, { actor: decision.by });
  }
}
