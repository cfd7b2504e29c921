import { Inject, Injectable } from '@nestjs/common';
import {
  decideSession, evolveSession, forkSession, initialSessionState, sessionStreamId, type Decision, type SessionCommand, type SessionState,
} from '#core';
import { BatchingQueue, NO_STREAM, WrongExpectedRevisionError, type EventLog } from '#event-log';
import { EVENT_LOG } from '../event-log/event-log.module.js';
import { foldSessionEvents, sessionAt } from './session-fold.js';

export interface CommandOutcome {
  readonly decision: Decision;
  /** Log position of the command's last event, or of the state it was decided on when it appended nothing. */
  readonly position: bigint;
}

type QueuedCommand = SessionCommand & { readonly actor: string; readonly tenant: string };

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

  execute(sessionId: string, command: SessionCommand, actor: string, tenant: string): Promise<CommandOutcome> {
    let queue = this.queues.get(sessionId);
    if (!queue) {
      queue = new BatchingQueue((commands: readonly QueuedCommand[]) => this.decideAndAppend(sessionId, commands));
      this.queues.set(sessionId, queue);
    }
    const pending = queue.push({ ...command, actor, tenant });
    return pending.finally(() => {
      if (queue!.idle) this.queues.delete(sessionId);
    });
  }

  /** The session folded from the log (cached), as of its latest event. */
  async load(sessionId: string): Promise<SessionState> {
    return (await this.refresh(sessionId)).state;
  }

  /** The session as it was at a log position: a fold of its events up to there (a fork's through its source), no read model involved. */
  loadAt(sessionId: string, position: bigint): Promise<SessionState> {
    return sessionAt(this.eventLog, sessionId, position);
  }

  private async decideAndAppend(sessionId: string, commands: readonly QueuedCommand[]): Promise<(CommandOutcome | Error)[]> {
    for (let attempt = 1; ; attempt += 1) {
      const cached = await this.refresh(sessionId);
      let state = cached.state;
      const decided = commands.map((command) => {
        try {
          const decision = decideSession(command, state);
          state = decision.events.reduce((current, { event }) => {
            const envelope = { ...event, position: current.status === 'open' ? current.position : 0n, recordedAt: new Date().toISOString() };
            return command.type === 'fork_session' ? forkSession(command.source, envelope) : evolveSession(current, envelope);
          }, state);
          return { command, decision };
        } catch (error) {
          return error as Error;
        }
      });
      const events = decided.flatMap((entry) =>
        entry instanceof Error ? [] : entry.decision.events.map(({ id, event }) => ({ id, type: event.type, data: event.data, correlationId: sessionId, actor: entry.command.actor, tenant: entry.command.tenant })),
      );
      if (events.length === 0) return decided.map((entry) => (entry instanceof Error ? entry : { decision: entry.decision, position: cachedPosition(cached.state) }));
      try {
        await this.eventLog.append(sessionStreamId(sessionId), events, cached.revision);
      } catch (error) {
        if (error instanceof WrongExpectedRevisionError && attempt < 5) continue;
        throw error;
      }
      // Fold what was stored (positions and recorded-at come from the log).
      const fresh = await this.refresh(sessionId);
      return decided.map((entry) => {
        if (entry instanceof Error) return entry;
        const last = entry.decision.events.at(-1);
        return { decision: entry.decision, position: last ? positionOf(fresh, last.id) ?? cachedPosition(fresh.state) : cachedPosition(fresh.state) };
      });
    }
  }

  /** Brings the cached fold up to the stream's end. */
  private async refresh(sessionId: string): Promise<CachedSession & { positions?: Map<string, bigint> }> {
    const entry = this.cache.get(sessionId) ?? { state: initialSessionState, revision: NO_STREAM as bigint | typeof NO_STREAM };
    const events = await this.eventLog.readStream(sessionStreamId(sessionId), { fromRevision: entry.revision === NO_STREAM ? 0n : entry.revision + 1n });
    entry.state = await foldSessionEvents(this.eventLog, entry.state, events);
    const positions = new Map<string, bigint>();
    for (const event of events) {
      entry.revision = event.revision;
      positions.set(event.id, event.position);
    }
    this.cache.delete(sessionId);
    if (entry.revision !== NO_STREAM) this.cache.set(sessionId, entry);
    for (const [oldest] of this.cache) {
      if (this.cache.size <= MAX_CACHED_SESSIONS) break;
      this.cache.delete(oldest);
    }
    return { ...entry, positions };
  }
}

function cachedPosition(state: SessionState): bigint {
  return state.status === 'open' ? state.position : 0n;
}

function positionOf(session: { positions?: Map<string, bigint> }, eventId: string): bigint | undefined {
  return session.positions?.get(eventId);
}
