import { RecordedSession } from '../testing/recorded-session.js';
import type { SessionCommand } from './session-decider.js';
import { sessionChanges } from './session-changes.js';
import type { OpenSession } from './session-events.js';

describe('session changes', () => {
  it('from the messages two folds set, the same as comparing every message, batch after batch of a long session', () => {
    const session = new RecordedSession();
    session.take({ type: 'open_session', sessionId: 's', title: null, metadata: {}, owner: 'o', writers: [] });
    let compared = 0;
    for (let turn = 0; turn < 300; turn += 1) {
      const commands: SessionCommand[] = [
        // Every tenth question starts a new top-level thread: selections move on the root too.
        {
          type: 'create_message',
          messageId: `u${turn}`,
          role: 'user',
          parentId: turn % 10 === 0 ? null : undefined,
          model: null,
          content: 'q',
        },
        {
          type: 'create_message',
          messageId: `a${turn}`,
          role: 'assistant',
          parentId: undefined,
          model: 'm',
          content: null,
        },
        { type: 'append_chunks', messageId: `a${turn}`, chunks: [{ seq: 1, type: 'text.delta', text: 'one' }] },
        { type: 'append_chunks', messageId: `a${turn}`, chunks: [{ seq: 2, type: 'text.delta', text: 'one two' }] },
      ];
      // And now and then an earlier branch is selected again.
      if (turn % 25 === 24)
        commands.push({
          type: 'select_branch',
          parentId: null,
          childId: `u${turn - 14 - ((turn - 14) % 10)}`,
          eventId: `00000000-0000-4000-8000-${String(turn).padStart(12, '0')}`,
        });
      for (const command of commands) {
        const { previous, read: next } = session.take(command);
        const everyMessage = { ...(previous as OpenSession), messages: new Map((previous as OpenSession).messages) };
        const expected = sessionChanges(everyMessage as unknown as OpenSession, next);
        expect(sessionChanges(previous, next)).toEqual(expected);
        if ((next as OpenSession).messages.changedSince((previous as OpenSession).messages)) compared += 1;
      }
    }
    // Most batches took the short way; the comparison above holds for those and for the rest.
    expect(compared).toBeGreaterThan(1_000);
  });
});
