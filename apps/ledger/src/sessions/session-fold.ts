import {
  evolveSessionEvents,
  forkSession,
  initialSessionState,
  parseSessionStreamId,
  sessionStreamId,
  type FoldPurpose,
  type SessionEventEnvelope,
  type SessionEventOf,
  type SessionState,
} from '#core';
import type { EventLogReader, ProjectionEvent, RecordedEvent } from '#event-log';

/** A fold reads only whole streams (a fork's source): the log, or the events of an export bundle. */
export type StreamReader = Pick<EventLogReader, 'readStream'>;

/**
 * Folds session events with the core reducer. A fork's stream starts with `session.forked`,
 * which holds a reference (source session and position), not a copy: it is applied to the
 * source's state as of that position, read from the log — recursively, for a fork of a fork.
 * Every read path (repository, projections, `?at=`) folds through here, so they agree. The
 * events between forks are folded in one call, so runs of one message's chunks fold on the message alone.
 */
export async function foldSessionEvents(
  eventLog: StreamReader,
  state: SessionState,
  events: readonly ProjectionEvent[],
  purpose: FoldPurpose,
): Promise<SessionState> {
  let folded = state;
  let run: SessionEventEnvelope[] = [];
  for (const event of events) {
    if (event.type !== 'session.forked') {
      run.push(sessionEnvelope(event));
      continue;
    }
    folded = evolveSessionEvents(folded, run, purpose);
    run = [];
    // A fork event anywhere but first does not apply (evolve leaves the state as it is).
    if (startsFork(folded, event)) folded = await applyFork(eventLog, event, purpose);
  }
  return evolveSessionEvents(folded, run, purpose);
}

/** Events read at once when reading a stream up to a position. */
const PAGE_EVENTS = 5_000;

/**
 * A stream's events up to a position (every one when `position` is undefined), in pages that
 * stop there: a fork near the start of a large source reads only what it stands on.
 */
export async function* streamPagesUpTo(
  reader: StreamReader,
  streamId: string,
  position: bigint | undefined,
): AsyncGenerator<readonly RecordedEvent[]> {
  for (let fromRevision = 0n; ;) {
    const page = await reader.readStream(streamId, { fromRevision, maxCount: PAGE_EVENTS });
    const past = position === undefined ? -1 : page.findIndex((event) => event.position > position);
    yield past === -1 ? page : page.slice(0, past);
    if (past !== -1 || page.length < PAGE_EVENTS) return;
    fromRevision = page.at(-1)!.revision + 1n;
  }
}

/** The session as it was at a log position (its last event at or before it), folded page by page. */
export async function sessionAt(
  eventLog: StreamReader,
  session: { tenant: string; sessionId: string },
  position: bigint,
  purpose: FoldPurpose,
): Promise<SessionState> {
  let state = initialSessionState;
  for await (const page of streamPagesUpTo(eventLog, sessionStreamId(session.tenant, session.sessionId), position))
    state = await foldSessionEvents(eventLog, state, page, purpose);
  return state;
}

export function startsFork(state: SessionState, event: ProjectionEvent): boolean {
  return event.type === 'session.forked' && state.status === 'absent';
}

export async function applyFork(
  eventLog: StreamReader,
  event: ProjectionEvent,
  purpose: FoldPurpose,
): Promise<SessionState> {
  const { source } = event.data as SessionEventOf<'session.forked'>['data'];
  // A fork's source is in the fork's own tenant, the one its stream's id names.
  const sourceState = await sessionAt(
    eventLog,
    { tenant: parseSessionStreamId(event.streamId)!.tenant, sessionId: source.sessionId },
    BigInt(source.position),
    purpose,
  );
  return forkSession(sourceState, sessionEnvelope(event));
}

export function sessionEnvelope(event: ProjectionEvent): SessionEventEnvelope {
  return { type: event.type, data: event.data, position: event.position, recordedAt: event.metadata.recordedAt };
}
