import type { DialectName } from '../dialects/dialects.js';
import { decideSession, type Decision, type SessionCommand } from '../session/session-decider.js';
import {
  evolveSession,
  initialSessionState,
  type MessageState,
  type SessionEvent,
  type SessionState,
} from '../session/session-events.js';

/**
 * Records provider events the way the ledger does, without a log: each batch is decided against
 * the session folded so far (so the translator's state is the one rebuilt from recorded events),
 * and the decided events are stored (a JSON round trip) and folded back.
 */
export class DialectRecording {
  private state: SessionState;
  private position = 0n;
  readonly messageId = 'm-assistant';
  /** The events decided so far, as the log holds them. */
  readonly recorded: SessionEvent[] = [];

  constructor(readonly dialect: DialectName) {
    this.state = initialSessionState;
    this.apply({ type: 'session.opened', data: { sessionId: 's-dialect', title: null, metadata: {} } });
    this.apply({
      type: 'message.created',
      data: { messageId: 'm-user', role: 'user', parentId: null, model: null, content: 'hi' },
    });
    this.apply({
      type: 'message.created',
      data: { messageId: this.messageId, role: 'assistant', parentId: 'm-user', model: null, content: null },
    });
  }

  /** Decides one request's events (throws what the route would refuse with) and folds what it appends. */
  send(firstSeq: number, events: readonly unknown[]): Decision {
    return this.decide({
      type: 'append_dialect_events',
      messageId: this.messageId,
      dialect: this.dialect,
      firstSeq,
      events,
    });
  }

  /** Any command against the session as recorded so far. */
  decide(command: SessionCommand): Decision {
    const decision = decideSession(command, this.state);
    for (const decided of decision.events) {
      const stored = JSON.parse(JSON.stringify(decided.event)) as SessionEvent;
      this.recorded.push(stored);
      this.apply(stored);
    }
    return decision;
  }

  /** The whole stream, `batchSize` events per request. */
  sendAll(events: readonly unknown[], batchSize = events.length): this {
    for (let start = 0; start < events.length; start += batchSize)
      this.send(start + 1, events.slice(start, start + batchSize));
    return this;
  }

  get message(): MessageState {
    if (this.state.status !== 'open') throw new Error('the session is not open');
    return this.state.messages.get(this.messageId)!;
  }

  private apply(event: SessionEvent): void {
    this.position += 1n;
    const recordedAt = new Date(Date.UTC(2026, 0, 1, 0, 0, Number(this.position))).toISOString();
    this.state = evolveSession(this.state, { ...event, position: this.position, recordedAt });
  }
}
