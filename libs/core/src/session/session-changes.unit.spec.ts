import { parseChunks } from '../chunks/chunk-schemas.js';
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

  it('finds each block new, changed, moved or dropped, as a comparison of every block by id does', () => {
    const session = new RecordedSession();
    session.take({ type: 'open_session', sessionId: 's', title: null, metadata: {}, owner: 'o', writers: [] });
    const message = (messageId: string, role: 'user' | 'assistant') =>
      ({ type: 'create_message', messageId, role, parentId: undefined, model: null, content: 'q' }) as const;
    session.take(message('u1', 'user'));
    session.take({ ...message('a1', 'assistant'), content: null });
    const search = { id: 's1', tool: { id: 'search', name: 'builtin_web_search' } };
    const read = { id: 't2', tool: { id: 'fs-read', name: 'read' } };
    const chunk = (seq: number, value: Record<string, unknown>): SessionCommand => ({
      type: 'append_chunks',
      messageId: 'a1',
      chunks: parseChunks([{ seq, ...value }]),
    });
    const batches: SessionCommand[][] = [
      [chunk(1, { type: 'llm_response_created' })],
      // The search takes the placeholder over; the read comes after it.
      [
        chunk(2, {
          type: 'mcp_tool_pending',
          responses: [
            { ...search, status: 'pending' },
            { ...read, status: 'pending' },
          ],
        }),
      ],
      [chunk(3, { type: 'text.start' }), chunk(4, { type: 'text.delta', text: 'Looking' })],
      // Its citation goes right after the search: the read and the text move.
      [
        chunk(5, {
          type: 'mcp_tool_complete',
          responses: [{ ...search, status: 'done', response: [{ url: 'https://a.example' }] }],
        }),
      ],
      [chunk(6, { type: 'text.delta', text: 'Looking it up' }), chunk(7, { type: 'llm_response_created' })],
      // In one batch, the untaken placeholder leaves the list and a translation takes its place.
      [
        chunk(8, { type: 'block_complete' }),
        { type: 'open_translation', messageId: 'a1', eventId: 'e-t1', blockId: 'a1-t1', targetLanguage: 'fr' },
      ],
    ];
    const seen = { moved: 0, removed: 0 };
    batches.forEach((commands, batch) => {
      const { previous, read: next } = session.take(...commands);
      const before = (previous as OpenSession).messages.get('a1')!.blocks.blocks;
      const after = (next as OpenSession).messages.get('a1')!.blocks.blocks;
      const places = new Map(before.map((block, place) => [block.id, { block, place }]));
      const expected = after.flatMap((block, place) => {
        const was = places.get(block.id);
        if (was && was.place !== place) seen.moved += 1;
        return was?.block === block && was.place === place ? [] : [{ id: block.id, index: place }];
      });
      const removed = before.filter((block) => !after.some((kept) => kept.id === block.id)).map(({ id }) => id);
      const changes = sessionChanges(previous, next)!;
      const found = changes.blocks.map(({ block, index }) => ({ id: block.id, index }));
      expect({ batch, found, removed: changes.removedBlocks.map(({ id }) => id) }).toEqual({
        batch,
        found: expected,
        removed,
      });
      seen.removed += removed.length;
    });
    // The stream did move and drop blocks, not only change them in place.
    expect(seen.moved).toBeGreaterThan(0);
    expect(seen.removed).toBe(1);
  });
});
