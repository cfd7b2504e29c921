import { pendingToolCalls } from '../testing/ignored-chunks.js';
import { seededRandom } from '../testing/seeded-random.js';
import { foldFootprint } from './fold-footprint.js';
import {
  evolveSessionEvents,
  initialSessionState,
  type SessionEvent,
  type SessionEventEnvelope,
  type SessionState,
} from './session-events.js';

const at = '2026-12-01T00:00:00.000Z';
const chunk = (messageId: string, data: Record<string, unknown> & { seq: number; type: string }): SessionEvent =>
  ({ type: `chunk.${data.type}`, data: { messageId, ...data } }) as SessionEvent;

describe('a fold footprint', () => {
  it('measured batch by batch from the fold before equals the footprint of the same events folded at once', () => {
    for (let seed = 1; seed <= 30; seed += 1) {
      const random = seededRandom(seed);
      const events: SessionEvent[] = [{ type: 'session.opened', data: { sessionId: 's', title: null, metadata: {} } }];
      const seqs = new Map<string, number>();
      for (let step = 0; step < 80; step += 1) {
        const ids = [...seqs.keys()];
        if (ids.length === 0 || random(8) === 0) {
          const id = `m${step}`;
          const content = random(2) === 0 ? `question ${step}` : null;
          events.push({
            type: 'message.created',
            data: {
              messageId: id,
              role: content ? 'user' : 'assistant',
              parentId: ids.at(-1) ?? null,
              model: null,
              content,
            },
          });
          seqs.set(id, 0);
          continue;
        }
        const id = ids[random(ids.length)];
        const seq = seqs.get(id)! + 1;
        seqs.set(id, seq);
        const kinds = [
          { type: 'llm_response_created' },
          { type: 'text.start' },
          { type: 'text.delta', text: 'word '.repeat(1 + random(20)) },
          { type: 'mcp_tool_pending', responses: pendingToolCalls(1 + random(4), random(6)) },
          { type: 'block_complete' },
        ];
        events.push(chunk(id, { seq, ...kinds[random(kinds.length)] }));
      }
      const envelopes: SessionEventEnvelope[] = events.map((event, index) => ({
        ...event,
        position: BigInt(index + 1),
        recordedAt: at,
      }));
      let state: SessionState = initialSessionState;
      let footprint = 0;
      for (let from = 0, size = 1; from < envelopes.length; from += size, size = 1 + random(6)) {
        const next = evolveSessionEvents(state, envelopes.slice(from, from + size), 'read');
        footprint = foldFootprint(next, { state, footprint });
        state = next;
      }
      const atOnce = evolveSessionEvents(initialSessionState, envelopes, 'read');
      expect({ seed, footprint }).toEqual({ seed, footprint: foldFootprint(atOnce) });
    }
  });
});
