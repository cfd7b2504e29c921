import { Inject, Injectable } from '@nestjs/common';
import {
  decideToolCall,
  evolveToolCall,
  initialToolCallState,
  toolCallStreamId,
  type ToolCallCommand,
  type ToolCallState,
} from '#core';
import {
  NO_STREAM,
  WrongExpectedRevisionError,
  type EventLog,
  type EventLogReader,
  type RecordedEvent,
  type StreamState,
} from '#event-log';
import { EVENT_LOG } from '../event-log/event-log.module.js';

/** A tool call as its tenant sees it: the stream name carries the tenant, so another tenant's call does not exist. */
export interface ToolCallRef {
  readonly tenant: string;
  readonly toolCallId: string;
}

export interface LoadedToolCall {
  readonly state: ToolCallState;
  readonly revision: StreamState;
  readonly events: readonly RecordedEvent[];
}

export interface ToolCallActor {
  readonly actor: string;
  readonly causationId?: string;
}

const MAX_ATTEMPTS = 5;

/** A tool call folded from its stream (a dozen events at most), as of its `maxCount` first events when given. */
export async function loadToolCall(
  eventLog: EventLogReader,
  { tenant, toolCallId }: ToolCallRef,
  maxCount?: number,
): Promise<LoadedToolCall> {
  const events = await eventLog.readStream(
    toolCallStreamId(tenant, toolCallId),
    maxCount === undefined ? {} : { maxCount },
  );
  const state = events.reduce<ToolCallState>((current, event) => evolveToolCall(current, event), initialToolCallState);
  return { state, revision: events.at(-1)?.revision ?? NO_STREAM, events };
}

/**
 * Runs tool-call commands against the log: fold the stream, decide, append with the revision it
 * was folded at. A concurrent append (a second reviewer, another instance's saga) makes the
 * append fail; the command is then decided again on the new state, where the decider refuses
 * what no longer applies (`already_decided`, `wrong_state`). So the first decision wins,
 * across processes too.
 */
@Injectable()
export class ToolCallRepository {
  constructor(@Inject(EVENT_LOG) private readonly eventLog: EventLog) {}

  load(ref: ToolCallRef): Promise<LoadedToolCall> {
    return loadToolCall(this.eventLog, ref);
  }

  async execute(
    ref: ToolCallRef,
    command: ToolCallCommand,
    { actor, causationId }: ToolCallActor,
  ): Promise<ToolCallState> {
    for (let attempt = 1; ; attempt += 1) {
      const loaded = await this.load(ref);
      const decided = decideToolCall(command, loaded.state);
      // decide refuses every command but `request` on a call that does not exist yet.
      const sessionId =
        command.type === 'request'
          ? command.sessionId
          : (loaded.state as Exclude<ToolCallState, { status: 'absent' }>).request.sessionId;
      const events = decided.map(({ id, event }) => ({
        id,
        type: event.type,
        data: event.data,
        actor,
        tenant: ref.tenant,
        correlationId: sessionId,
        ...(causationId ? { causationId } : {}),
      }));
      let appended;
      try {
        appended = await this.eventLog.append(toolCallStreamId(ref.tenant, ref.toolCallId), events, loaded.revision);
      } catch (error) {
        if (error instanceof WrongExpectedRevisionError && attempt < MAX_ATTEMPTS) continue;
        throw error;
      }
      // Someone recorded the same step meanwhile: read what the log holds. Otherwise what was appended is what the log holds.
      if (appended.duplicates.length > 0) return (await this.load(ref)).state;
      return decided.reduce(
        (state, { event }) => evolveToolCall(state, { ...event, position: appended.position }),
        loaded.state,
      );
    }
  }
}
