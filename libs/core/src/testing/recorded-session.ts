import { decideSession, type SessionCommand } from '../session/session-decider.js';
import {
  evolveSessionEvents,
  initialSessionState,
  type SessionEventEnvelope,
  type SessionState,
} from '../session/session-events.js';

/**
 * A session taken batch by batch as the service takes it, for tests that fold it: its commands
 * decided on the state the decider holds, their events stamped as the log would hand them back
 * (positions from 1, one recorded time).
 */
export class RecordedSession {
  private position = 0n;
  /** The session as the decider holds it (folded to decide). */
  state: SessionState = initialSessionState;

  /**
   * One batch: the events of every command given, each decided on the state the ones before it
   * left. Returns the state before the batch and the batch folded onto it for reading, as a
   * projection or the live hub folds it; the held state moves on by the batch folded to decide.
   */
  take(...commands: SessionCommand[]): { previous: SessionState; read: SessionState } {
    const previous = this.state;
    const events = commands.flatMap((command) => {
      const own = decideSession(command, this.state).events.map(({ event }): SessionEventEnvelope => {
        this.position += 1n;
        return { ...event, position: this.position, recordedAt: '2026-01-01T00:00:00.000Z' };
      });
      this.state = evolveSessionEvents(this.state, own);
      return own;
    });
    return { previous, read: evolveSessionEvents(previous, events, 'read') };
  }
}
