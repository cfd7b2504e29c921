import { Inject, Injectable } from '@nestjs/common';
import {
  decideToolCall,
  evolveToolCall,
  initialToolCallState,
  ToolCallError,
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
const MAX_CACHED_CALLS = 5_000;

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
 *
 * The state each append leaves is kept, so the saga's next step on the call decides on it
 * without reading the stream again; a stale one (another process appended) fails its append on
 * the revision and is read afresh.
 */
@Injectable()
export class ToolCallRepository {
  private readonly folded = new Map<string, { state: ToolCallState; revision: StreamState }>();

  constructor(@Inject(EVENT_LOG) private readonly eventLog: EventLog) {}

  async load(ref: ToolCallRef): Promise<LoadedToolCall> {
    const loaded = await loadToolCall(this.eventLog, ref);
    this.remember(ref, loaded);
    return loaded;
  }

  async execute(
    ref: ToolCallRef,
    command: ToolCallCommand,
    { actor, causationId }: ToolCallActor,
  ): Promise<ToolCallState> {
    const key = toolCallStreamId(ref.tenant, ref.toolCallId);
    for (let attempt = 1; ; attempt += 1) {
      const cached = this.folded.get(key);
      const loaded = cached ?? (await this.load(ref));
      let decided;
      try {
        decided = decideToolCall(command, loaded.state);
      } catch (error) {
        // Refused on a kept state another process may have moved on: decide again on the stream as it is.
        if (!cached || !(error instanceof ToolCallError)) throw error;
        this.folded.delete(key);
        continue;
      }
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
        appended = await this.eventLog.append(key, events, loaded.revision);
      } catch (error) {
        this.folded.delete(key);
        if (error instanceof WrongExpectedRevisionError && attempt < MAX_ATTEMPTS) continue;
        throw error;
      }
      // Someone recorded the same step meanwhile: read what the log holds. Otherwise what was appended is what the log holds.
      if (appended.duplicates.length > 0) return (await this.load(ref)).state;
      const state = decided.reduce(
        (current, { event }) => evolveToolCall(current, { ...event, position: appended.position }),
        loaded.state,
      );
      this.remember(ref, { state, revision: appended.nextExpectedRevision });
      return state;
    }
  }

  private remember(ref: ToolCallRef, folded: { state: ToolCallState; revision: StreamState }): void {
    const key = toolCallStreamId(ref.tenant, ref.toolCallId);
    this.folded.delete(key);
    this.folded.set(key, { state: folded.state, revision: folded.revision });
    for (const [oldest] of this.folded) {
      if (this.folded.size <= MAX_CACHED_CALLS) break;
      this.folded.delete(oldest);
    }
  }
}
