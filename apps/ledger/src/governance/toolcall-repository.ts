import { Inject, Injectable } from '@nestjs/common';
import {
  decideToolCall,
  evolveToolCall,
  initialToolCallState,
  rememberNewest,
  ToolCallError,
  toolCallStreamId,
  type ToolCallCommand,
  type ToolCallDecidedEvent,
  type ToolCallState,
} from '#core';
import {
  NO_STREAM,
  WrongExpectedRevisionError,
  type AppendResult,
  type EventLog,
  type EventLogReader,
  type NewEvent,
  type RecordedEvent,
  type StreamAppend,
  type StreamState,
} from '#event-log';
import { EVENT_LOG } from '../event-log/event-log-token.js';

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
 * Steps decided in memory on a call and not stored yet: `state` is the call once they are, and
 * `revision` where its stream stood when they were decided. Drafting several steps and storing
 * them in one append saves a round trip per step that waits for nothing outside.
 */
export interface ToolCallDraft {
  readonly ref: ToolCallRef;
  readonly state: ToolCallState;
  /** The call as stored, at `revision`. */
  readonly stored: ToolCallState;
  readonly revision: StreamState;
  readonly decided: readonly { readonly decided: ToolCallDecidedEvent; readonly event: NewEvent }[];
  /** The state after each command decided in the draft, in order. */
  readonly steps: readonly ToolCallState[];
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

  /**
   * A draft on the call: `kept`, as this process last stored or read it (else read); `log`, as
   * the stream holds it now (another instance may have appended); `new`, as kept, and a call this
   * process has not seen is taken to be new without reading (the append's revision check says if
   * it was not).
   */
  async draft(ref: ToolCallRef, from: 'kept' | 'log' | 'new' = 'kept'): Promise<ToolCallDraft> {
    const kept = from === 'log' ? undefined : this.folded.get(toolCallStreamId(ref.tenant, ref.toolCallId));
    const { state, revision } =
      kept ?? (from === 'new' ? { state: initialToolCallState, revision: NO_STREAM } : await this.load(ref));
    return { ref, state, stored: state, revision, decided: [], steps: [] };
  }

  /** The draft with `command` decided on it; throws the decider's `ToolCallError`. */
  decide(draft: ToolCallDraft, command: ToolCallCommand, { actor, causationId }: ToolCallActor): ToolCallDraft {
    const decided = decideToolCall(command, draft.state);
    // decide refuses every command but `request` on a call that does not exist yet.
    const sessionId =
      command.type === 'request'
        ? command.sessionId
        : (draft.state as Exclude<ToolCallState, { status: 'absent' }>).request.sessionId;
    const events = decided.map((step) => ({
      decided: step,
      event: {
        id: step.id,
        type: step.event.type,
        data: step.event.data,
        actor,
        tenant: draft.ref.tenant,
        correlationId: sessionId,
        ...(causationId ? { causationId } : {}),
      },
    }));
    const position = draft.state.status === 'absent' ? -1n : draft.state.position;
    const state = decided.reduce((current, { event }) => evolveToolCall(current, { ...event, position }), draft.state);
    return { ...draft, state, decided: [...draft.decided, ...events], steps: [...draft.steps, state] };
  }

  /** The draft's events as one stream's part of an append. */
  part(draft: ToolCallDraft): StreamAppend {
    const { tenant, toolCallId } = draft.ref;
    const events = draft.decided.map(({ event }) => event);
    return { streamId: toolCallStreamId(tenant, toolCallId), events, expectedRevision: draft.revision };
  }

  /**
   * Stores the draft through `store` (by default an append of its part alone; the saga stores it
   * with the session's block update). The call's new state, or `undefined` when another writer
   * moved the call first or recorded the same step: the next draft reads the stream afresh.
   */
  async record(
    draft: ToolCallDraft,
    store?: (part: StreamAppend) => Promise<AppendResult>,
  ): Promise<ToolCallState | undefined> {
    try {
      return await this.store(draft, store);
    } catch (error) {
      if (error instanceof WrongExpectedRevisionError && error.streamId === this.part(draft).streamId) return undefined;
      throw error;
    }
  }

  private async store(
    draft: ToolCallDraft,
    store: (part: StreamAppend) => Promise<AppendResult> = ({ streamId, events, expectedRevision }) =>
      this.eventLog.append(streamId, events, expectedRevision),
  ): Promise<ToolCallState | undefined> {
    if (draft.decided.length === 0) return draft.state;
    const part = this.part(draft);
    let appended: AppendResult;
    try {
      appended = await store(part);
    } catch (error) {
      this.folded.delete(part.streamId);
      throw error;
    }
    // Someone recorded the same step meanwhile: what the log holds is to be read. Otherwise it is what was appended.
    if (appended.duplicates.length > 0) {
      this.folded.delete(part.streamId);
      return undefined;
    }
    const state = draft.decided.reduce(
      (current, { decided: { event } }) => evolveToolCall(current, { ...event, position: appended.position }),
      draft.stored,
    );
    this.remember(draft.ref, { state, revision: appended.nextExpectedRevision });
    return state;
  }

  /** Decides `command` on the call and appends it; decided again on the stream as it is after a conflict. */
  async execute(ref: ToolCallRef, command: ToolCallCommand, as: ToolCallActor): Promise<ToolCallState> {
    for (let attempt = 1; ; attempt += 1) {
      const cached = this.folded.has(toolCallStreamId(ref.tenant, ref.toolCallId));
      const draft = await this.draft(ref);
      let decided;
      try {
        decided = this.decide(draft, command, as);
      } catch (error) {
        // Refused on a kept state another process may have moved on: decide again on the stream as it is.
        if (!cached || !(error instanceof ToolCallError)) throw error;
        this.folded.delete(toolCallStreamId(ref.tenant, ref.toolCallId));
        continue;
      }
      try {
        return (await this.store(decided)) ?? (await this.load(ref)).state;
      } catch (error) {
        if (!(error instanceof WrongExpectedRevisionError) || attempt >= MAX_ATTEMPTS) throw error;
      }
    }
  }

  private remember(ref: ToolCallRef, folded: { state: ToolCallState; revision: StreamState }): void {
    const key = toolCallStreamId(ref.tenant, ref.toolCallId);
    rememberNewest(this.folded, key, { state: folded.state, revision: folded.revision }, MAX_CACHED_CALLS);
  }
}
