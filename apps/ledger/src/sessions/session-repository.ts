import { Inject, Injectable, Optional } from '@nestjs/common';
import {
  checkSessionQuota,
  decideSession,
  DEFAULT_SESSION_QUOTA,
  evolveSession,
  foldFootprint,
  forkSession,
  initialSessionState,
  mayWrite,
  SessionError,
  sessionStreamId,
  SizedCache,
  type Decision,
  type DecidedEvent,
  type FoldPurpose,
  type SessionCommand,
  type SessionQuota,
  type SessionState,
} from '#core';
import {
  BatchingQueue,
  NO_STREAM,
  WrongExpectedRevisionError,
  type AppendResult,
  type EventLog,
  type StreamAppend,
} from '#event-log';
import { EVENT_LOG } from '../event-log/event-log-token.js';
import type { Principal } from '../identity/principal.js';
import { defaultFoldCacheBytes, FOLD_CACHE_BYTES, MAX_CACHED_FOLDS } from './fold-cache.js';
import { foldSessionEvents, sessionAt } from './session-fold.js';

export interface CommandOutcome {
  readonly decision: Decision;
  /** Log position of the command's last event, or of the state it was decided on when it appended nothing. */
  readonly position: bigint;
  /** What the other streams' parts given with the command stored, in their order. */
  readonly alongside?: readonly AppendResult[];
}

/** A session, named as its tenant names it: tenants choose their own ids. */
export interface SessionRef {
  readonly tenant: string;
  readonly sessionId: string;
}

/**
 * Who appends: a principal's actor and subject, checked against the session's writers, or one of
 * the system's own steps (`subject: null`), which the saga takes on the caller's behalf.
 */
export interface SessionAuthor {
  readonly actor: string;
  readonly subject: string | null;
  /** Admins may grant writers on any session of their tenant. */
  readonly admin?: boolean;
}

/** A principal as the author of what its request appends. */
export function authorOf(principal: Principal): SessionAuthor & { readonly subject: string } {
  return { actor: principal.actor, subject: principal.subject, admin: principal.roles.has('admin') };
}

type QueuedCommand = SessionCommand & {
  readonly author: SessionAuthor;
  readonly alongside?: readonly StreamAppend[];
};

/** A session folded as of a revision; replaced whole, never changed in place, so a fold in flight sees a stable value. */
interface CachedSession {
  readonly state: SessionState;
  readonly revision: bigint | typeof NO_STREAM;
  /** What it holds in memory, by `foldFootprint`'s estimate. */
  readonly footprint: number;
}

/** The fold `state` at `revision`, measured from `previous`, the fold it grew from. */
const cachedFold = (
  previous: CachedSession | undefined,
  state: SessionState,
  revision: CachedSession['revision'],
): CachedSession => ({
  state,
  revision,
  footprint: foldFootprint(state, previous),
});

/** Appends of one group before giving up on a session other writers keep moving. */
const MAX_ATTEMPTS = 5;

/** The quota every session is held to (`LEDGER_SESSION_MAX_*`). */
export const SESSION_QUOTA = Symbol('SESSION_QUOTA');

/**
 * Runs session commands against the log. Commands for one session queue and are decided in
 * order against the folded state, and each group goes as one append with the revision the
 * state was folded at; if another process appended meanwhile, the state is brought up to date
 * from the log and the group decided again. Folded states stay cached and take in what each
 * append stored from its result, so a streaming producer's batch costs one append and no read.
 */
@Injectable()
export class SessionRepository {
  private readonly cache: SizedCache<string, CachedSession>;
  private readonly queues = new Map<string, BatchingQueue<QueuedCommand, CommandOutcome>>();

  constructor(
    @Inject(EVENT_LOG) private readonly eventLog: EventLog,
    @Optional() @Inject(SESSION_QUOTA) private readonly quota: SessionQuota = DEFAULT_SESSION_QUOTA,
    @Optional() @Inject(FOLD_CACHE_BYTES) cacheBytes: number = defaultFoldCacheBytes(),
  ) {
    this.cache = new SizedCache(MAX_CACHED_FOLDS, cacheBytes);
  }

  /**
   * `alongside`: other streams' parts stored in the same append as the command's events, before
   * them (see `appendMany`), and only if the command is decided; a conflict on one of them fails
   * this command alone.
   */
  execute(
    session: SessionRef,
    command: SessionCommand,
    author: SessionAuthor,
    alongside?: readonly StreamAppend[],
  ): Promise<CommandOutcome> {
    const streamId = sessionStreamId(session.tenant, session.sessionId);
    let queue = this.queues.get(streamId);
    if (!queue) {
      queue = new BatchingQueue((commands: readonly QueuedCommand[]) => this.decideAndAppend(session, commands));
      this.queues.set(streamId, queue);
    }
    const pending = queue.push({ ...command, author, ...(alongside ? { alongside } : {}) });
    return pending.finally(() => {
      if (queue.idle) this.queues.delete(streamId);
    });
  }

  /** The session folded from the log (cached), as of its latest event. */
  async load(session: SessionRef): Promise<SessionState> {
    return (await this.refresh(session)).state;
  }

  /**
   * The session as this instance last folded it, without asking the log: possibly behind, never
   * wrong about what only grows (its owner and writers). `undefined` when not cached.
   */
  cached(session: SessionRef): SessionState | undefined {
    return this.cache.get(sessionStreamId(session.tenant, session.sessionId))?.state;
  }

  /** Refuses, as the append would, a command of this kind appending these events (none: any) to the session (see `checkSessionQuota`). */
  checkQuota(state: SessionState, type: SessionCommand['type'], events: readonly DecidedEvent[] = []): void {
    checkSessionQuota({ type }, state, events, this.quota);
  }

  /** The session as it was at a log position: a fold of its events up to there (a fork's through its source), no read model involved. */
  loadAt(session: SessionRef, position: bigint, purpose: FoldPurpose): Promise<SessionState> {
    return sessionAt(this.eventLog, session, position, purpose);
  }

  /**
   * Decides the group on the cached fold (read from the log only when not cached) and appends it
   * with the revision that fold is at: if another instance appended meanwhile, the log refuses,
   * the fold catches up from the log and the group is decided again. A refusal or a no-op is only
   * answered once decided on the log's state. What was stored is folded
   * from the append's own result (positions and recorded-at as the log gave them).
   */
  private async decideAndAppend(
    session: SessionRef,
    commands: readonly QueuedCommand[],
  ): Promise<(CommandOutcome | Error)[]> {
    const streamId = sessionStreamId(session.tenant, session.sessionId);
    for (let attempt = 1; ; attempt += 1) {
      const cachedOnly = attempt === 1 && this.cache.has(streamId);
      const cached = cachedOnly ? this.cache.get(streamId)! : await this.refresh(session);
      let state = cached.state;
      let footprint = cached.footprint;
      const decided = commands.map((command, index) => {
        try {
          authorize(command, state);
          const decision = decideSession(command, state);
          // A retry of what is stored appends nothing: it is answered whatever the session holds.
          if (decision.events.length > 0) checkSessionQuota(command, state, decision.events, this.quota, footprint);
          // The group's next command is decided on this one's outcome, and judged on the memory it leaves the
          // fold holding. After the last there is nothing to decide: the cache is folded from what the log
          // stored (`absorb`).
          if (index === commands.length - 1) return { command, decision };
          const before = state;
          state = decision.events.reduce((current, { event }) => {
            const envelope = {
              ...event,
              position: current.status === 'open' ? current.position : 0n,
              recordedAt: new Date().toISOString(),
            };
            return command.type === 'fork_session'
              ? forkSession(command.source, envelope)
              : evolveSession(current, envelope);
          }, state);
          if (state !== before) footprint = foldFootprint(state, { state: before, footprint });
          return { command, decision };
        } catch (error) {
          return error as Error;
        }
      });
      const events = decided.flatMap((entry) =>
        entry instanceof Error
          ? []
          : entry.decision.events.map(({ id, event }) => ({
              id,
              type: event.type,
              data: event.data,
              correlationId: session.sessionId,
              actor: entry.command.author.actor,
              tenant: session.tenant,
            })),
      );
      // A cached fold may lack what another instance appended: it can only make a command append
      // too early (the log refuses), or refuse it or find nothing to do wrongly, so those are
      // decided again on the log's state before they are answered.
      if (cachedOnly && decided.some((entry) => entry instanceof Error || entry.decision.events.length === 0)) continue;
      const alongside = decided.flatMap((entry) => (entry instanceof Error ? [] : (entry.command.alongside ?? [])));
      const own = events.length > 0 ? [{ streamId, events, expectedRevision: cached.revision }] : [];
      if (own.length + alongside.length === 0)
        return decided.map((entry) =>
          entry instanceof Error ? entry : { decision: entry.decision, position: cachedPosition(cached.state) },
        );
      let results: AppendResult[];
      try {
        results = await this.eventLog.appendMany([...alongside, ...own]);
      } catch (error) {
        // A conflict on another stream's part is that command's alone: thrown, the queue retries the others without it.
        if (error instanceof WrongExpectedRevisionError && error.streamId === streamId && attempt < MAX_ATTEMPTS)
          continue;
        throw error;
      }
      const byCommand = alongsideResults(decided, results);
      if (own.length === 0)
        return decided.map((entry, index) =>
          entry instanceof Error
            ? entry
            : { decision: entry.decision, position: cachedPosition(cached.state), alongside: byCommand[index] },
        );
      const appended = results.at(-1)!;
      // The log held every event already (it checks the revision only when something is new). Those the
      // state decided on held too are a retry the log answers (a tool block shown again). One stored since
      // that state was read is another writer's, maybe with other content: what this call means, a repeat
      // or a conflict, is decided again on the log's state.
      if (appended.appended === 0 && appended.position > cachedPosition(cached.state)) {
        if (attempt < MAX_ATTEMPTS) continue;
        throw new Error(`session ${streamId}: another writer stored the same events on each of ${attempt} attempts`);
      }
      const positions = new Map(appended.events.map((event) => [event.id, event.position]));
      const fresh = await this.absorb(session, cached, appended);
      return decided.map((entry, index) => {
        if (entry instanceof Error) return entry;
        const last = entry.decision.events.at(-1);
        return {
          decision: entry.decision,
          position: (last && positions.get(last.id)) ?? cachedPosition(fresh.state),
          alongside: byCommand[index],
        };
      });
    }
  }

  /**
   * Folds what an append stored into the cached session. An append that found some of its events
   * already stored (a retry) or a fold that moved meanwhile is brought up to date from the log.
   */
  private async absorb(session: SessionRef, folded: CachedSession, appended: AppendResult): Promise<CachedSession> {
    const streamId = sessionStreamId(session.tenant, session.sessionId);
    const entry = this.cache.get(streamId);
    const first = appended.events[0]?.revision;
    const continues = first === (folded.revision === NO_STREAM ? 0n : folded.revision + 1n);
    if (appended.duplicates.length > 0 || !continues || (entry !== undefined && entry !== folded))
      return this.refresh(session);
    const state = await foldSessionEvents(this.eventLog, folded.state, appended.events, 'decide');
    const next = cachedFold(folded, state, appended.nextExpectedRevision);
    this.keep(streamId, next);
    return next;
  }

  /** Brings the cached fold up to the stream's end. */
  private async refresh(session: SessionRef): Promise<CachedSession> {
    const streamId = sessionStreamId(session.tenant, session.sessionId);
    const cached = this.cache.get(streamId);
    const from = cached === undefined || cached.revision === NO_STREAM ? 0n : cached.revision + 1n;
    const events = await this.eventLog.readStream(streamId, { fromRevision: from });
    // Another refresh or append of this session may have moved the cache while this one read.
    const current = this.cache.get(streamId);
    if (current !== cached) return this.refresh(session);
    const state = await foldSessionEvents(this.eventLog, cached?.state ?? initialSessionState, events, 'decide');
    const next = cachedFold(cached, state, events.at(-1)?.revision ?? cached?.revision ?? NO_STREAM);
    this.keep(streamId, next);
    return next;
  }

  private keep(streamId: string, entry: CachedSession): void {
    if (entry.revision === NO_STREAM) this.cache.delete(streamId);
    else this.cache.set(streamId, entry, entry.footprint);
  }
}

/**
 * A principal writes only to sessions it owns or was granted (a session that exists is refused
 * before anything else is said of it); the owner or an admin grants. The system's own steps
 * write wherever the saga works.
 */
function authorize(command: QueuedCommand, state: SessionState): void {
  const { subject, admin } = command.author;
  if (subject === null || state.status !== 'open') return;
  const allowed =
    command.type === 'grant_writers'
      ? admin === true || state.owner === null || state.owner === subject
      : mayWrite(state, subject);
  if (!allowed)
    throw new SessionError(
      'not_a_writer',
      command.type === 'grant_writers'
        ? "only the session's owner or an admin grants writers"
        : 'this credential may not write to this session',
    );
}

/** Each decided command's share of the alongside parts' results, which come first and in command order. */
function alongsideResults(
  decided: readonly ({ readonly command: QueuedCommand } | Error)[],
  results: readonly AppendResult[],
): (readonly AppendResult[] | undefined)[] {
  let next = 0;
  return decided.map((entry) => {
    if (entry instanceof Error || !entry.command.alongside) return undefined;
    next += entry.command.alongside.length;
    return results.slice(next - entry.command.alongside.length, next);
  });
}

function cachedPosition(state: SessionState): bigint {
  return state.status === 'open' ? state.position : 0n;
}
