import { decideSession, type SessionCommand } from '../session/session-decider.js';
import type { SessionEventEnvelope, SessionState } from '../session/session-events.js';

/**
 * A session's commands decided as the service decides them, their events stamped as the log would
 * hand them back (positions from 1, one recorded time), for tests that fold them.
 */
export class RecordedSession {
  private position = 0n;

  /** `command`'s events, decided on `state`. */
  decide(command: SessionCommand, state: SessionState): SessionEventEnvelope[] {
    return decideSession(command, state).events.map(({ event }) => {
      this.position += 1n;
      return { ...event, position: this.position, recordedAt: '2026-01-01T00:00:00.000Z' };
    });
  }
}
