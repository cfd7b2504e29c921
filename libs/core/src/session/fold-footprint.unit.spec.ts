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

  /** The session opened with one assistant message `m` and these chunks recorded on it, folded for reading. */
  const foldedWith = (...chunks: readonly (Record<string, unknown> & { type: string })[]) =>
    evolveSessionEvents(
      initialSessionState,
      [
        { type: 'session.opened', data: { sessionId: 's', title: null, metadata: {} } },
        {
          type: 'message.created',
          data: { messageId: 'm', role: 'assistant', parentId: null, model: null, content: null },
        },
        ...chunks.map((data, index) => chunk('m', { seq: index + 1, ...data })),
      ].map((event, index) => ({ ...event, position: BigInt(index + 1), recordedAt: at })),
      'read',
    );

  // Floors of what the heap must hold: a character at least a byte, an item at least a pointer's slot.
  it('counts the text of a part no block holds: the snapshot its chunks grow', () => {
    const text = 'x'.repeat(100_000);
    expect(foldFootprint(foldedWith({ type: 'text.delta', text }))).toBeGreaterThan(text.length);
    expect(foldFootprint(foldedWith({ type: 'thinking.delta', text }))).toBeGreaterThan(text.length);
  });

  it('counts every item of an array and every character of a member name a producer made up', () => {
    const items = 20_000;
    const withArguments = (args: unknown) =>
      foldFootprint(
        foldedWith({
          type: 'mcp_tool_pending',
          responses: [{ id: 'c', tool: { name: 'read' }, status: 'pending', arguments: args }],
        }),
      );
    const bare = withArguments({});
    expect(withArguments(new Array(items).fill('')) - bare).toBeGreaterThan(items * 8);
    const names = Object.fromEntries(Array.from({ length: 100 }, (_, index) => [`${index}`.padEnd(1_000, 'k'), 0]));
    expect(withArguments(names) - bare).toBeGreaterThan(100 * 1_000);
  });

  it('counts a member of an object at what a hidden class of its own costs', () => {
    const openedWith = (metadata: Record<string, unknown>) =>
      foldFootprint(
        evolveSessionEvents(
          initialSessionState,
          [{ type: 'session.opened', data: { sessionId: 's', title: null, metadata }, position: 1n, recordedAt: at }],
          'read',
        ),
      );
    // Objects each of their own keys: V8 makes a hidden class for each, about 108 bytes a member (forty-third round).
    const shapes = Array.from({ length: 100 }, (_, object) =>
      Object.fromEntries(Array.from({ length: 100 }, (_, member) => [`${object}.${member}`, null])),
    );
    expect(openedWith({ shapes }) - openedWith({})).toBeGreaterThan(100 * 100 * 108);
  });

  it("counts a message's earlier version its map of messages still holds in its base, where its blocks differ", () => {
    const ids = Array.from({ length: 33 }, (_, index) => `m${index}`);
    const image = (salt: number) => ({ type: 'png', images: [String.fromCharCode(0x4e00 + salt).repeat(10_000)] });
    const batches: SessionEvent[][] = [
      [
        { type: 'session.opened', data: { sessionId: 's', title: null, metadata: {} } },
        ...ids.map((messageId): SessionEvent => ({
          type: 'message.created',
          data: { messageId, role: 'assistant', parentId: null, model: null, content: null },
        })),
      ],
      ids.flatMap((id, index) => [
        chunk(id, { seq: 1, type: 'image.created' }),
        chunk(id, { seq: 2, type: 'image.delta', image: image(index) }),
      ]),
      // The same images replaced by others: the first versions stay in the base the second batch's map was made on.
      ids.slice(0, 32).map((id, index) => chunk(id, { seq: 3, type: 'image.delta', image: image(100 + index) })),
    ];
    let position = 0n;
    let state: SessionState = initialSessionState;
    let footprint = 0;
    const footprints: number[] = [];
    for (const batch of batches) {
      const envelopes = batch.map((event) => ({ ...event, position: (position += 1n), recordedAt: at }));
      const next = evolveSessionEvents(state, envelopes, 'read');
      footprint = foldFootprint(next, state.status === 'open' ? { state, footprint } : undefined);
      state = next;
      footprints.push(footprint);
    }
    expect(state.status === 'open' && state.messages.shadowed('m0')).toBeTruthy();
    expect(footprints[2] - footprints[1]).toBeGreaterThan(32 * 2 * 10_000);
    expect(foldFootprint(state)).toBe(footprint);
  });

  it('does not walk again data a rebuilt block keeps: a small chunk on a call with large arguments', () => {
    const walks = { count: 0 };
    const members = Object.fromEntries(Array.from({ length: 1_000 }, (_, index) => [`key${index}`, index]));
    const args = new Proxy(members, {
      ownKeys: (target) => {
        walks.count += 1;
        return Reflect.ownKeys(target);
      },
    });
    const call = { id: 'c', tool: { name: 'read' } };
    const pending = foldedWith({
      type: 'mcp_tool_pending',
      responses: [{ ...call, status: 'pending', arguments: args }],
    });
    const footprint = foldFootprint(pending);
    expect(walks.count).toBe(1);
    const invoking = evolveSessionEvents(
      pending,
      [chunk('m', { seq: 2, type: 'mcp_tool_in_progress', responses: [{ ...call, status: 'invoking' }] })].map(
        (event) => ({ ...event, position: 4n, recordedAt: at }),
      ),
      'read',
    );
    const walked = walks.count;
    expect(foldFootprint(invoking, { state: pending, footprint })).toBe(foldFootprint(invoking));
    expect(walks.count).toBe(walked);
  });
});
