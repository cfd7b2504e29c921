import { Inject, Injectable } from '@nestjs/common';
import {
  decideSession,
  evolveSession,
  forkSession,
  initialSessionState,
  mayWrite,
  SessionError,
  sessionStreamId,
  type Decision,
  type SessionCommand,
  type SessionState,
} from '#core';
import { BatchingQueue, NO_STREAM, WrongExpectedRevisionError, type EventLog } from '#event-log';
import { EVENT_LOG } from '../event-log/event-log.module.js';
import type { Principal } from '../identity/principal.js';
import { foldSessionEvents, sessionAt } from './session-fold.js';

export interface CommandOutcome {
  readonly decision: Decision;
  /** Log position of the command's last event, or of the state it was decided on when it appended nothing. */
  readonly position: bigint;
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

type QueuedCommand = SessionCommand & { readonly author: SessionAuthor };

interface CachedSession {
  state: SessionState;
  revision: bigint | typeof NO_STREAM;
}

const MAX_CACHED_SESSIONS = 5_000;

/**
 * Runs session commands against the log. Commands for one session queue and are decided in
 * order against the folded state, and each group goes as one append with the revision the
 * state was folded at; if another process appended meanwhile, the state is brought up to date
 * from the log and the group decided again. Folded states stay cached, so a streaming producer
 * does not make every batch re-read its session.
 */
@Injectable()
export class SessionRepository {
  private readonly cache = new Map<string, CachedSession>();
  private readonly queues = new Map<string, BatchingQueue<QueuedCommand, CommandOutcome>>();

  constructor(@Inject(EVENT_LOG) private readonly eventLog: EventLog) {}

  execute(session: SessionRef, command: SessionCommand, author: SessionAuthor): Promise<CommandOutcome> {
    const streamId = sessionStreamId(session.tenant, session.sessionId);
    let queue = this.queues.get(streamId);
    if (!queue) {
      queue = new BatchingQueue((commands: readonly QueuedCommand[]) => this.decideAndAppend(session, commands));
      this.queues.set(streamId, queue);
    }
    const pending = queue.push({ ...command, author });
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

  /** The session as it was at a log position: a fold of its events up to there (a fork's through its source), no read model involved. */
  loadAt(session: SessionRef, position: bigint): Promise<SessionState> {
    return sessionAt(this.eventLog, session, position);
  }

  private async decideAndAppend(
    session: SessionRef,
    commands: readonly QueuedCommand[],
  ): Promise<(CommandOutcome | Error)[]> {
    for (let attempt = 1; ; attempt += 1) {
      const cached = await this.refresh(session);
      let state = cached.state;
      const decided = commands.map((command) => {
        try {
          authorize(command, state);
          const decision = decideSession(command, state);
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
      if (events.length === 0)
        return decided.map((entry) =>
          entry instanceof Error ? entry : { decision: entry.decision, position: cachedPosition(cached.state) },
        );
      try {
        await this.eventLog.append(sessionStreamId(session.tenant, session.sessionId), events, cached.revision);
      } catch (error) {
        if (error instanceof WrongExpectedRevisionError && attempt < 5) continue;
        throw error;
      }
      // Fold what was stored (positions and recorded-at come from the log).
      const fresh = await this.refresh(session);
      return decided.map((entry) => {
        if (entry instanceof Error) return entry;
        const last = entry.decision.events.at(-1);
        return {
          decision: entry.decision,
          position: last ? (positionOf(fresh, last.id) ?? cachedPosition(fresh.state)) : cachedPosition(fresh.state),
        };
      });
    }
  }

  /** Brings the cached fold up to the stream's end. */
  private async refresh(session: SessionRef): Promise<CachedSession & { positions?: Map<string, bigint> }> {
    const streamId = sessionStreamId(session.tenant, session.sessionId);
    const entry = this.cache.get(streamId) ?? {
      state: initialSessionState,
      revision: NO_STREAM as bigint | typeof NO_STREAM,
    };
    const events = await this.eventLog.readStream(streamId, {
      fromRevision: entry.revision === NO_STREAM ? 0n : entry.revision + 1n,
    });
    entry.state = await foldSessionEvents(this.eventLog, entry.state, events);
    const positions = new Map<string, bigint>();
    for (const event of events) {
      entry.revision = event.revision;
      positions.set(event.id, event.position);
    }
    this.cache.delete(streamId);
    if (entry.revision !== NO_STREAM) this.cache.set(streamId, entry);
    for (const [oldest] of this.cache) {
      if (this.cache.size <= MAX_CACHED_SESSIONS) break;
      this.cache.delete(oldest);
    }
    return { ...entry, positions };
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

function cachedPosition(state: SessionState): bigint {
  return state.status === 'open' ? state.position : 0n;
}

function positionOf(session: { positions?: Map<string, bigint> }, eventId: string): bigint | undefined {
  return session.positions?.get(eventId);
}
