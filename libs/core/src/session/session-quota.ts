import type { SessionCommand } from './session-decider.js';
import { SessionError } from './session-error.js';
import type { SessionState } from './session-events.js';

/**
 * How much one session may hold. Every read of a session folds its whole stream, a fork's source
 * included (the live view, `?at=`, verify, export, the block projection after a restart), so a
 * session without bounds is one that some day cannot be read (decision 0037).
 */
export interface SessionQuota {
  /** Events its fold reads, a fork's source's included. */
  readonly events: number;
  /** UTF-8 bytes of those events' data as JSON. */
  readonly bytes: number;
  /** Forks of forks it may stand on: each is one more stream a fold of it reads. */
  readonly forkDepth: number;
}

export const DEFAULT_SESSION_QUOTA: SessionQuota = { events: 500_000, bytes: 128 * 1024 * 1024, forkDepth: 32 };

/**
 * Work under way may go on past the quota by this share of it, so that a session that fills up
 * while an answer streams or a tool call runs still records how they end.
 */
export const UNDER_WAY_SHARE = 0.25;

/** Commands that carry on what a session already holds: a message's chunks, an answer's end, a tool call's steps. */
const UNDER_WAY: ReadonlySet<SessionCommand['type']> = new Set([
  'append_chunks',
  'append_dialect_events',
  'record_answer_failure',
  'update_tool_call',
]);

/**
 * Refuses a command that would append to a session holding its quota: new work (a message, a
 * model call, a branch, a translation, writers) at the quota, work under way at the quota and its
 * share more. A fork is refused when it would stand on more forks than the quota allows; a fork
 * of a full session is taken, and is full from its start. The command that crosses the line is
 * taken whole, so a session holds at most its bounds plus one command.
 */
export function checkSessionQuota(
  command: { readonly type: SessionCommand['type']; readonly source?: SessionState },
  state: SessionState,
  quota: SessionQuota,
): void {
  if (command.type === 'fork_session') {
    const depth = command.source?.status === 'open' ? command.source.forkDepth + 1 : 0;
    if (depth > quota.forkDepth)
      throw new SessionError(
        'fork_too_deep',
        `the source stands on ${depth - 1} forks; a session may stand on at most ${quota.forkDepth}`,
        'sourceSessionId',
      );
    return;
  }
  if (state.status !== 'open') return;
  if (state.stored === null) throw new Error('a session folded for reading cannot be checked against its quota');
  const { events, bytes } = state.stored;
  const scale = UNDER_WAY.has(command.type) ? 1 + UNDER_WAY_SHARE : 1;
  const limit = (bound: number) =>
    scale === 1 ? `its quota is ${bound}` : `its quota is ${bound}, and ${bound * scale} for work under way`;
  if (events >= quota.events * scale)
    throw new SessionError('session_full', `the session holds ${events} events; ${limit(quota.events)}`);
  if (bytes >= quota.bytes * scale)
    throw new SessionError('session_full', `the session holds ${bytes} bytes of event data; ${limit(quota.bytes)}`);
}
