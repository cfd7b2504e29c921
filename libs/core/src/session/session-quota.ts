import { jsonBytes } from '../hashing/canonical-json.js';
import { foldFootprint } from './fold-footprint.js';
import type { DecidedEvent, SessionCommand } from './session-decider.js';
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
  /**
   * What its fold holds in memory, by `foldFootprint`'s estimate: events of small tool calls count up to 40× their
   * JSON (decision 0068), so the bytes alone let one session's folds outgrow the heap.
   */
  readonly memory: number;
  /** Messages in its tree: a fold of one event (an append's decide, the live view) copies the map of them. */
  readonly messages: number;
  /** Forks of forks it may stand on: each is one more stream a fold of it reads. */
  readonly forkDepth: number;
}

export const DEFAULT_SESSION_QUOTA: SessionQuota = {
  events: 500_000,
  bytes: 128 * 1024 * 1024,
  memory: 512 * 1024 * 1024,
  messages: 5_000,
  forkDepth: 32,
};

/**
 * Work under way may go on past the quota by this share of it, so that a message streaming when
 * the session fills up is not cut off at once.
 */
export const UNDER_WAY_SHARE = 0.25;

/** How far each kind of command may take a session, as a multiple of its quota. */
function reachOf(type: SessionCommand['type']): number {
  switch (type) {
    // Carrying on a message: its chunks, its provider events.
    case 'append_chunks':
    case 'append_dialect_events':
      return 1 + UNDER_WAY_SHARE;
    // A tool call's steps shown on its block: one chunk can start many calls, each repeating its
    // arguments, so they too stop somewhere. Past it the call's own stream still records every step.
    case 'update_tool_call':
      return 1 + 2 * UNDER_WAY_SHARE;
    // How an answer through the gateway ended: one small record per call the quota took.
    case 'record_answer_failure':
      return Infinity;
    default:
      return 1;
  }
}

/**
 * Refuses a command whose events would take the session past its quota, before anything is
 * stored: new work (a message, a model call, a branch, a translation, writers) past the quota,
 * a message's chunks past the quota and its share more, a tool call's steps past twice that share;
 * how a gateway call ended is always recorded. With no events given, asks whether the session can
 * take new work of this kind at all. A fork is refused when it would stand on more forks than the
 * quota allows; a fork of a full session is taken, and is full from its start. A new session's
 * first event may not alone pass the byte quota. Memory is judged on what the session holds
 * (`footprint`: its fold's, measured when not given), not on what the events would add: they can
 * take it past by one batch at most.
 */
export function checkSessionQuota(
  command: { readonly type: SessionCommand['type']; readonly source?: SessionState },
  state: SessionState,
  events: readonly DecidedEvent[],
  quota: SessionQuota,
  footprint?: number,
): void {
  if (command.type === 'fork_session') {
    const depth = command.source?.status === 'open' ? command.source.forkDepth + 1 : 0;
    if (depth > quota.forkDepth)
      throw new SessionError(
        'fork_too_deep',
        `the source stands on ${depth - 1} forks; a session may stand on at most ${quota.forkDepth}`,
        'sourceSessionId',
      );
  }
  if (state.status !== 'open') {
    // A session's first event (its title and metadata) may not alone hold more than its quota.
    const bytes = sum(events, ({ event }) => jsonBytes(event.data));
    if (bytes > quota.bytes)
      throw new SessionError(
        'session_full',
        `this would take the session from 0 to ${bytes} bytes of event data, past its quota of ${quota.bytes}`,
      );
    return;
  }
  if (state.stored === null) throw new Error('a session folded for reading cannot be checked against its quota');
  const reach = reachOf(command.type);
  if (reach === Infinity) return;
  const measures: [string, number, number, number][] = [
    ['events', state.stored.events, events.length, quota.events],
    ['bytes of event data', state.stored.bytes, sum(events, ({ event }) => jsonBytes(event.data)), quota.bytes],
    ['bytes of memory when folded', footprint ?? foldFootprint(state), 0, quota.memory],
    [
      'messages',
      state.messages.size,
      sum(events, ({ event }) => (event.type === 'message.created' ? 1 : 0)),
      quota.messages,
    ],
  ];
  for (const [unit, held, added, bound] of measures) {
    const limit = Math.floor(bound * reach);
    const quotaText =
      reach === 1 ? `its quota of ${bound}` : `${limit}, its quota of ${bound} and a share more for work under way`;
    if (held >= limit)
      throw new SessionError('session_full', `the session holds ${held} ${unit}; it may hold ${quotaText}`);
    if (held + added > limit)
      throw new SessionError(
        'session_full',
        `this would take the session from ${held} to ${held + added} ${unit}, past ${quotaText}`,
      );
  }
}

const sum = <Item>(items: readonly Item[], measure: (item: Item) => number) =>
  items.reduce((total, item) => total + measure(item), 0);
