import { seededRandom } from '../testing/seeded-random.js';
import { activePath } from './branch-tree.js';
import {
  forkSession,
  evolveSession,
  evolveSessionEvents,
  chunkDigest,
  initialSessionState,
  type OpenSession,
  type SessionEvent,
  type SessionEventEnvelope,
  type SessionState,
} from './session-events.js';

const at = '2026-01-01T00:00:00.000Z';
const envelopes = (...events: SessionEvent[]): SessionEventEnvelope[] =>
  events.map((event, index) => ({ ...event, position: BigInt(index + 1), recordedAt: at }));
const oneByOne = (state: SessionState, events: readonly SessionEventEnvelope[]) =>
  events.reduce((folded, event) => evolveSession(folded, event), state);

const opened: SessionEvent = { type: 'session.opened', data: { sessionId: 's1', title: null, metadata: {} } };
const created = (messageId: string, role: 'user' | 'assistant', parentId: string | null): SessionEvent => ({
  type: 'message.created',
  data: { messageId, role, parentId, model: null, content: null },
});
const chunk = (messageId: string, data: Record<string, unknown> & { seq: number; type: string }): SessionEvent =>
  ({ type: `chunk.${data.type}`, data: { messageId, ...data } }) as SessionEvent;

describe('session fold', () => {
  it('folds a run of events as evolving one by one does: runs of chunks, other messages, seqs out of turn', () => {
    const events = envelopes(
      opened,
      created('u1', 'user', null),
      created('a1', 'assistant', 'u1'),
      chunk('a1', { seq: 1, type: 'text.start' }),
      chunk('a1', { seq: 2, type: 'text.delta', text: 'Hel' }),
      chunk('a1', { seq: 3, type: 'text.delta', append: 'lo' }),
      chunk('a1', { seq: 5, type: 'text.delta', append: 'gap' }),
      chunk('zz', { seq: 1, type: 'text.start' }),
      created('a2', 'assistant', 'u1'),
      chunk('a2', { seq: 1, type: 'thinking.start' }),
      chunk('a1', { seq: 4, type: 'text.complete', text: 'Hello' }),
      chunk('a2', { seq: 2, type: 'thinking.delta', text: 'hm' }),
      chunk('a1', { seq: 5, type: 'block_complete' }),
      chunk('a1', { seq: 6, type: 'text.start' }),
    );
    for (let split = 0; split <= events.length; split += 1) {
      const folded = evolveSessionEvents(
        evolveSessionEvents(initialSessionState, events.slice(0, split)),
        events.slice(split),
      );
      expect(folded).toEqual(oneByOne(initialSessionState, events));
    }
  });

  it('keeps each state its own chunk digests when two folds branch from one state', () => {
    const base = oneByOne(
      initialSessionState,
      envelopes(opened, created('u1', 'user', null), created('a1', 'assistant', 'u1')),
    );
    const next = (text: string) =>
      evolveSession(base, { ...chunk('a1', { seq: 1, type: 'text.delta', text }), position: 9n, recordedAt: at });
    const first = next('first') as OpenSession;
    const second = next('second') as OpenSession;
    const third = evolveSession(first, {
      ...chunk('a1', { seq: 2, type: 'text.delta', append: '!' }),
      position: 10n,
      recordedAt: at,
    }) as OpenSession;
    const digests = (state: OpenSession) => {
      const { chunkDigests } = state.messages.get('a1')!;
      return chunkDigests.items.slice(0, chunkDigests.length);
    };
    const text = (seq: number, full: string) => chunkDigest({ seq, type: 'text.delta', text: full });
    expect(digests(first)).toEqual([text(1, 'first')]);
    expect(digests(second)).toEqual([text(1, 'second')]);
    expect(digests(third)).toEqual([text(1, 'first'), text(2, 'first!')]);
    expect(digests(base as OpenSession)).toEqual([]);
  });
  it('leaves the state a batch starts from as it was, though the batch sets its runs in a map of its own', () => {
    const base = oneByOne(
      initialSessionState,
      envelopes(
        opened,
        created('u1', 'user', null),
        created('a1', 'assistant', 'u1'),
        created('a2', 'assistant', 'u1'),
      ),
    ) as OpenSession;
    const before = [...base.messages];
    const interleaved = (from: number) =>
      [1, 2, 3].flatMap((seq) =>
        ['a1', 'a2'].map((messageId, offset) => ({
          ...chunk(
            messageId,
            seq === 1 ? { seq, type: 'text.start' } : { seq, type: 'text.delta', text: 'x'.repeat(seq) },
          ),
          position: BigInt(from + seq * 2 + offset),
          recordedAt: at,
        })),
      );
    const select = (childId: string, position: bigint): SessionEventEnvelope => ({
      type: 'message.branch_selected',
      data: { parentId: 'u1', childId },
      position,
      recordedAt: at,
    });
    const batches = [
      interleaved(10),
      // A batch that makes its map with a new message first, then sets runs in it.
      [{ ...created('a3', 'assistant', 'u1'), position: 10n, recordedAt: at }, ...interleaved(11)],
      // Selections and new messages between runs, the first selection on the map the batch started from.
      [
        select('a1', 9n),
        ...interleaved(10),
        { ...created('u2', 'user', 'a2'), position: 30n, recordedAt: at },
        select('a2', 31n),
        { ...created('a4', 'assistant', 'u2'), position: 32n, recordedAt: at },
        ...interleaved(40),
      ],
    ];
    for (const batch of batches) {
      const folded = evolveSessionEvents(base, batch);
      expect(folded).toEqual(oneByOne(base, batch));
      expect([...base.messages]).toEqual(before);
      for (const [id, message] of before) expect(base.messages.get(id)).toBe(message);
      expect((folded as OpenSession).messages).not.toBe(base.messages);
    }
  });

  it('selects the branches a model of the tree selects, batched or one by one: chains, old branches, selections', () => {
    // A batch selects only the new edge under a message it has just created; any other creation walks its path.
    for (let seed = 1; seed <= 40; seed += 1) {
      const next = seededRandom(seed);
      // The model: each message's parent, and the child each parent (null: the session) selects.
      const parents = new Map<string, string | null>();
      const selected = new Map<string | null, string>();
      const selectPath = (id: string) => {
        for (let child: string | null = id; child !== null; child = parents.get(child)!)
          selected.set(parents.get(child)!, child);
      };
      const events: SessionEvent[] = [opened];
      for (let step = 0; step < 60; step += 1) {
        const ids = [...parents.keys()];
        const roll = next(10);
        if (ids.length === 0 || roll < 4) {
          // Under the newest message (a chain), an older one (a branch), or at the root.
          const parentId = ids.length === 0 || next(8) === 0 ? null : roll < 2 ? ids.at(-1)! : ids[next(ids.length)];
          parents.set(`m${step}`, parentId);
          selectPath(`m${step}`);
          events.push(created(`m${step}`, step % 2 === 0 ? 'user' : 'assistant', parentId));
        } else if (roll < 6) {
          const childId = ids[next(ids.length)];
          const parentId = parents.get(childId)!;
          if (parentId === null) continue;
          selected.set(parentId, childId);
          events.push({ type: 'message.branch_selected', data: { parentId, childId } });
        } else {
          events.push(chunk(ids[next(ids.length)], { seq: 1, type: 'text.start' }));
        }
      }
      const all = envelopes(...events);
      const selections = (state: OpenSession) => ({
        root: state.selectedRootId,
        children: [...state.messages.values()].map((message) => [message.id, message.selectedChildId]),
      });
      const expected = {
        root: selected.get(null) ?? null,
        children: [...parents.keys()].map((id) => [id, selected.get(id) ?? null]),
      };
      expect(selections(oneByOne(initialSessionState, all) as OpenSession)).toEqual(expected);
      for (const split of [0, 1, next(all.length), next(all.length), all.length]) {
        const folded = evolveSessionEvents(
          evolveSessionEvents(initialSessionState, all.slice(0, split)),
          all.slice(split),
        );
        expect(selections(folded as OpenSession)).toEqual(expected);
        expect(folded).toEqual(oneByOne(initialSessionState, all));
      }
    }
  });

  it('takes a creation folded again for no new leaf: a message under it still selects its whole path', () => {
    const base = oneByOne(
      initialSessionState,
      envelopes(opened, created('x', 'user', null), created('y', 'user', null)),
    );
    const again: SessionEventEnvelope[] = [
      { ...created('x', 'user', null), position: 2n, recordedAt: at },
      { ...created('z', 'assistant', 'x'), position: 4n, recordedAt: at },
    ];
    const folded = evolveSessionEvents(base, again) as OpenSession;
    expect(folded.selectedRootId).toBe('x');
    expect(folded.messages.get('x')!.selectedChildId).toBe('z');
    expect(folded).toEqual(oneByOne(base, again));
  });

  it('keeps a long chain on the selected path when it is folded in one batch', () => {
    const chain = Array.from({ length: 2_000 }, (_, index) =>
      created(`c${index}`, index % 2 === 0 ? 'user' : 'assistant', index === 0 ? null : `c${index - 1}`),
    );
    const folded = evolveSessionEvents(initialSessionState, envelopes(opened, ...chain)) as OpenSession;
    expect(folded.selectedRootId).toBe('c0');
    for (let index = 0; index < 1_999; index += 1)
      expect(folded.messages.get(`c${index}`)!.selectedChildId).toBe(`c${index + 1}`);
    expect(folded.messages.get('c1999')!.selectedChildId).toBeNull();
    expect(folded).toEqual(oneByOne(initialSessionState, envelopes(opened, ...chain)));
  });
});

describe('the active leaf', () => {
  const leafByWalking = (state: SessionState) =>
    state.status === 'open' ? (activePath(state.selectedRootId, state.messages).at(-1)?.id ?? null) : null;

  it('is where the active path ends, after every event: new messages, branches under older ones, new threads, selections, forks', () => {
    const events: SessionEvent[] = [opened];
    let leaf: string | null = null;
    for (let index = 0; index < 60; index += 1) {
      // Mostly under the leaf; every seventh under an older message (a branch), every eleventh a new thread.
      const parentId = index % 11 === 0 ? null : index % 7 === 0 ? `m${index - 5}` : leaf;
      events.push(created(`m${index}`, index % 2 === 0 ? 'user' : 'assistant', parentId));
      leaf = `m${index}`;
      if (index % 13 === 12)
        events.push({ type: 'message.branch_selected', data: { parentId: `m${index - 9}`, childId: `m${index - 8}` } });
      if (index % 17 === 16) events.push({ type: 'message.branch_selected', data: { parentId: null, childId: 'm0' } });
    }
    const stream = envelopes(...events);
    let state: SessionState = initialSessionState;
    for (const event of stream) {
      state = evolveSession(state, event);
      expect((state as OpenSession).activeLeafId).toBe(leafByWalking(state));
    }
    expect(evolveSessionEvents(initialSessionState, stream)).toEqual(state);
    for (const messageId of [null, 'm20', 'm33']) {
      const fork = forkSession(state, {
        type: 'session.forked',
        data: { sessionId: 'f', title: null, metadata: {}, source: { sessionId: 's1', position: '1', messageId } },
        position: 1_000n,
        recordedAt: at,
      });
      expect((fork as OpenSession).activeLeafId).toBe(leafByWalking(fork));
    }
  });
});
