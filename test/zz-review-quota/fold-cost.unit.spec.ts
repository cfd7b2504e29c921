/**
 * Probe: the quota bounds events and bytes, but the fold's cost per event grows with the number of
 * messages (every message.created / branch_selected / chunk run copies the messages Map), so a
 * session well inside its event quota folds in time quadratic in its message count.
 */
import { decideSession, evolveSessionEvents, initialSessionState, type SessionCommand, type SessionEventEnvelope, type SessionState, evolveSession, type OpenSession } from '#core';

const recordedAt = '2026-01-01T00:00:00.000Z';

function build(messages: number, chain: boolean): SessionEventEnvelope[] {
  let position = 1n;
  const events: SessionEventEnvelope[] = [];
  let state: SessionState = initialSessionState;
  const push = (command: SessionCommand) => {
    for (const { event } of decideSession(command, state).events) {
      const envelope = { ...event, position: position++, recordedAt };
      events.push(envelope);
      state = evolveSession(state, envelope, 'read');
    }
  };
  push({ type: 'open_session', sessionId: 's', title: null, metadata: {}, owner: 'o', writers: [] });
  // Build events directly (deciding each would itself be quadratic): message.created as the decider makes them.
  const template = decideSession(
    { type: 'create_message', messageId: 'm0', role: 'user', parentId: null, model: null, content: 'x' } as SessionCommand,
    state,
  ).events[0].event;
  for (let i = 0; i < messages; i += 1) {
    const data = { ...(template.data as object), messageId: `m${i}`, parentId: chain && i > 0 ? `m${i - 1}` : null };
    events.push({ type: template.type, data, position: position++, recordedAt });
  }
  return events;
}

function time(events: SessionEventEnvelope[], purpose: 'read' | 'decide'): number {
  const start = performance.now();
  const state = evolveSessionEvents(initialSessionState, events, purpose) as OpenSession;
  const ms = performance.now() - start;
  expect(state.messages.size).toBe(events.length - 1);
  return ms;
}

describe('fold cost within the quota', () => {
  for (const chain of [false, true])
    it(`folds N ${chain ? 'chained' : 'top-level'} messages in time growing ~N^2`, () => {
      const rows: string[] = [];
      for (const n of [2_000, 4_000, 8_000, 16_000]) {
        const events = build(n, chain);
        const bytes = events.reduce((sum, e) => sum + Buffer.byteLength(JSON.stringify(e.data)), 0);
        rows.push(`n=${n} bytes=${bytes} read=${time(events, 'read').toFixed(0)}ms decide=${time(events, 'decide').toFixed(0)}ms`);
      }
      console.log(rows.join('\n'));
    }, 600_000);
});
