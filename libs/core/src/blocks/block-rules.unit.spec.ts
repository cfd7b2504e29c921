import { parseChunk } from '../chunks/chunk-schemas.js';
import { decodeChunk, EMPTY_SNAPSHOTS, encodeChunk, type StoredChunk } from '../chunks/snapshot-text.js';
import { compareBlocks, loadBlockVectors } from '../testing/block-vectors.js';
import { pendingToolCalls } from '../testing/ignored-chunks.js';
import { seededRandom } from '../testing/seeded-random.js';
import {
  evolveBlocks,
  evolveGovernedTool,
  ignoredReason,
  initialMessageBlocks,
  MAX_MESSAGE_BLOCKS,
  openTranslation,
  type MessageBlocksState,
} from './block-rules.js';

/** Folds posted chunks the way the ledger does: validate, store (snapshot suffixes), restore, evolve. */
function fold(
  messageId: string,
  raw: readonly Record<string, unknown>[],
): { state: MessageBlocksState; stored: StoredChunk[] } {
  let encoder = EMPTY_SNAPSHOTS;
  let decoder = EMPTY_SNAPSHOTS;
  let state = initialMessageBlocks(messageId);
  const stored: StoredChunk[] = [];
  raw.forEach((value, index) => {
    const chunk = parseChunk({ seq: index + 1, ...value }, index);
    const encoded = encodeChunk(encoder, chunk);
    encoder = encoded.state;
    stored.push(encoded.stored);
    const decoded = decodeChunk(decoder, JSON.parse(JSON.stringify(encoded.stored)) as StoredChunk);
    decoder = decoded.state;
    expect(decoded.chunk).toEqual(chunk);
    state = evolveBlocks(state, {
      chunk: decoded.chunk,
      recordedAt: new Date(Date.UTC(2026, 0, 1, 0, 0, index)).toISOString(),
    });
  });
  return { state, stored };
}

describe.each(loadBlockVectors())('vector $file', (vector) => {
  it('gives exactly the expected blocks, in display order, and the message status', () => {
    const { state } = fold('msg-1', vector.chunks);
    expect(state.status).toBe(vector.expected.messageStatus);
    const [actual, expected] = compareBlocks(state.blocks, vector.expected.blocks);
    expect(actual).toEqual(expected);
  });

  it('gives every block a distinct id and keeps ids stable when the same chunks are folded again', () => {
    const first = fold('msg-1', vector.chunks).state;
    const again = fold('msg-1', vector.chunks).state;
    expect(new Set(first.blocks.map((block) => block.id)).size).toBe(first.blocks.length);
    expect(again).toEqual(first);
  });

  it('names a reason for exactly the chunks that change nothing (markers aside)', () => {
    let state = initialMessageBlocks('msg-1');
    vector.chunks.forEach((value, index) => {
      const chunk = parseChunk({ seq: index + 1, ...value }, index);
      const next = evolveBlocks(state, { chunk, recordedAt: `t${index}` });
      const marker = chunk.type === 'raw' || chunk.type === 'llm_response_complete';
      const unchanged = next === state && !marker;
      expect({ seq: chunk.seq, ignored: ignoredReason(state, chunk) !== undefined }).toEqual({
        seq: chunk.seq,
        ignored: unchanged,
      });
      state = next;
    });
  });
});

describe('snapshot text in the log (rule 4)', () => {
  it('stores suffixes when a snapshot extends the previous one, so a long answer costs O(n) bytes', () => {
    const words = Array.from({ length: 400 }, (_, index) => `word${index} `);
    const chunks: Record<string, unknown>[] = [
      { type: 'text.start' },
      ...words.map((_, index) => ({ type: 'text.delta', text: words.slice(0, index + 1).join('') })),
      { type: 'text.complete', text: words.join('') },
    ];
    const { stored, state } = fold('msg-long', chunks);
    const snapshotBytes = words.reduce((sum, _, index) => sum + words.slice(0, index + 1).join('').length, 0);
    const storedBytes = stored.reduce((sum, chunk) => sum + JSON.stringify(chunk).length, 0);
    expect(storedBytes).toBeLessThan(snapshotBytes / 20);
    expect(state.blocks[0].content).toBe(words.join(''));
  });

  it('stores the whole text when a snapshot does not extend the previous one (a provider rewrote it)', () => {
    const { stored, state } = fold('msg-rewrite', [
      { type: 'text.start' },
      { type: 'text.delta', text: 'Helo' },
      { type: 'text.delta', text: 'Hello' },
      { type: 'text.delta', text: 'Hello, world' },
    ]);
    expect(
      stored
        .slice(1)
        .map((chunk) => ('append' in chunk ? { append: chunk.append } : { text: (chunk as { text: string }).text })),
    ).toEqual([{ text: 'Helo' }, { text: 'Hello' }, { append: ', world' }]);
    expect(state.blocks[0].content).toBe('Hello, world');
  });
});

describe('a full message (rule 10)', () => {
  const call = (id: string, status = 'pending') => ({ id, tool: { id: 'fs-read', name: 'read' }, status });
  const full = fold('msg-full', [
    { type: 'mcp_tool_pending', responses: pendingToolCalls(MAX_MESSAGE_BLOCKS - 2) },
    { type: 'text.start' },
    // The chunk that fills it: its calls apply up to the limit, the rest change nothing.
    { type: 'mcp_tool_pending', responses: pendingToolCalls(3, MAX_MESSAGE_BLOCKS - 2) },
  ]).state;
  const after = (raw: Record<string, unknown>) =>
    evolveBlocks(full, { chunk: parseChunk({ seq: 4, ...raw }, 0), recordedAt: 'later' });

  it('holds the most blocks a message may, the calls past it dropped', () => {
    expect(full.blocks).toHaveLength(MAX_MESSAGE_BLOCKS);
    expect(full.blocks.at(-1)?.toolId).toBe(`call-${MAX_MESSAGE_BLOCKS - 2}`);
    expect(full.toolBlockIds.has(`call-${MAX_MESSAGE_BLOCKS - 1}`)).toBe(false);
  });

  it.each([
    { type: 'llm_response_created' },
    { type: 'thinking.start' },
    { type: 'image.created' },
    { type: 'llm_websearch_in_progress' },
    { type: 'llm_websearch_complete', llm_web_search: { source: 'openai', results: [] } },
    { type: 'video.searched', video: { type: 'url', content: 'https://example.com/v' } },
    { type: 'mcp_tool_streaming', responses: [call('new', 'streaming')] },
    { type: 'mcp_tool_pending', responses: [call('new')] },
  ])('starts no block for $type, and names why', (raw) => {
    const chunk = parseChunk({ seq: 4, ...raw }, 0);
    expect(after(raw)).toBe(full);
    expect(ignoredReason(full, chunk)).toBe('message at its block limit');
  });

  it('still changes the blocks it holds, and ends', () => {
    const text = after({ type: 'text.delta', text: 'still here' });
    expect(text.blocks.find((block) => block.type === 'main_text')?.content).toBe('still here');
    const done = after({ type: 'mcp_tool_complete', responses: [{ ...call('call-0', 'done'), response: 'ok' }] });
    expect(done.blocks[0]).toMatchObject({ toolId: 'call-0', status: 'success', content: 'ok' });
    const failed = after({ type: 'error', error: { message: 'boom' } });
    expect(failed).toMatchObject({ status: 'error', finalized: true });
    expect(failed.blocks.at(-1)?.type).toBe('error');
  });

  it('lets a block take the last placeholder over, and adds no citation to a full message', () => {
    const search = { id: 'search', tool: { id: 'web', name: 'builtin_web_search' } };
    const awaiting = fold('msg-awaiting', [
      {
        type: 'mcp_tool_pending',
        responses: [{ ...search, status: 'pending' }, ...pendingToolCalls(MAX_MESSAGE_BLOCKS - 2)],
      },
      { type: 'llm_response_created' },
    ]).state;
    expect(awaiting.blocks).toHaveLength(MAX_MESSAGE_BLOCKS);
    const answer = parseChunk({ seq: 3, type: 'text.start' }, 0);
    expect(ignoredReason(awaiting, answer)).toBeUndefined();
    const answered = evolveBlocks(awaiting, { chunk: answer, recordedAt: 'later' });
    expect(answered.blocks).toHaveLength(MAX_MESSAGE_BLOCKS);
    expect(answered.blocks.at(-1)).toMatchObject({ type: 'main_text', status: 'streaming' });
    const another = parseChunk({ seq: 4, type: 'llm_response_created' }, 0);
    expect(ignoredReason(answered, another)).toBe('message at its block limit');
    const results = [{ url: 'https://example.com', title: 'found' }];
    const found = parseChunk(
      { seq: 4, type: 'mcp_tool_complete', responses: [{ ...search, status: 'done', response: results }] },
      0,
    );
    const completed = evolveBlocks(answered, { chunk: found, recordedAt: 'later' });
    expect(ignoredReason(answered, found)).toBeUndefined();
    expect(completed.blocks).toHaveLength(MAX_MESSAGE_BLOCKS);
    expect(completed.blocks[0]).toMatchObject({ toolId: 'search', status: 'success', content: results });
    expect(completed.blocks.some((block) => block.type === 'citation')).toBe(false);
  });

  it('gives a governed call without a block none, and a translation no block', () => {
    const response = { ...call('governed'), status: 'pending' as const };
    expect(evolveGovernedTool(full, { response, governance: {} }, 'later')).toBe(full);
    const governedOld = evolveGovernedTool(full, { response: { ...response, id: 'call-1' }, governance: {} }, 'later');
    expect(governedOld.blocks[1]).toMatchObject({ toolId: 'call-1', metadata: { governance: {} } });
    expect(openTranslation(full, { blockId: 'tr', targetLanguage: 'fr' }, 'later')).toBe(full);
  });
});

describe('a tool chunk of many calls, applied on one draft of the list', () => {
  const TOOL_CHUNKS = ['mcp_tool_streaming', 'mcp_tool_pending', 'mcp_tool_in_progress', 'mcp_tool_complete'] as const;
  const apply = (state: MessageBlocksState, raw: Record<string, unknown>, seq: number) =>
    evolveBlocks(state, { chunk: parseChunk({ seq, ...raw }, 0), recordedAt: `t${seq}` });
  const comparable = (state: MessageBlocksState) => ({
    ...state,
    toolBlockIds: [...state.toolBlockIds],
    governedToolIds: [...state.governedToolIds],
  });

  it.each([
    { label: 'a short message', before: 3 },
    { label: 'a message a few blocks from its limit', before: MAX_MESSAGE_BLOCKS - 6 },
  ])('gives $label what its calls one chunk each give, at the same seq', ({ before }) => {
    // Calls repeat within a chunk (one opens a block another then changes), search tools add citations the
    // limit counts, placeholders are taken over, and chunks of a few calls search where longer ones make a map: each a
    // way a draft could drift from the list it stands for.
    const base = fold('msg-draft', [
      { type: 'mcp_tool_pending', responses: pendingToolCalls(before) },
      { type: 'llm_response_created' },
    ]).state;
    const trials = before < 100 ? 300 : 12;
    for (let seed = 1; seed <= trials; seed += 1) {
      const random = seededRandom(seed);
      let batched = base;
      let oneByOne = base;
      for (let seq = 3; seq < 23; seq += 1) {
        if (random(6) === 0) {
          batched = apply(batched, { type: 'llm_response_created' }, seq);
          oneByOne = apply(oneByOne, { type: 'llm_response_created' }, seq);
          continue;
        }
        const type = TOOL_CHUNKS[random(TOOL_CHUNKS.length)];
        const responses = Array.from({ length: 2 + random(16) }, () => {
          const search = random(3) === 0;
          const status = type === 'mcp_tool_complete' ? (random(4) === 0 ? 'error' : 'done') : 'pending';
          return {
            id: random(3) === 0 ? `call-${random(before)}` : `new-${random(8)}`,
            tool: search ? { id: 'web', name: 'builtin_web_search' } : { id: 'fs-read', name: 'read' },
            status,
            ...(random(2) === 0 ? { arguments: { path: `/p${seq}` } } : {}),
            ...(status === 'pending'
              ? {}
              : { response: random(3) === 0 ? [] : [{ url: `https://r/${random(1000)}` }] }),
          };
        });
        const chunk = { type, responses };
        const next = apply(batched, chunk, seq);
        expect(next === batched).toBe(ignoredReason(batched, parseChunk({ seq, ...chunk }, 0)) !== undefined);
        batched = next;
        for (const response of responses) oneByOne = apply(oneByOne, { type, responses: [response] }, seq);
      }
      expect({ seed, state: comparable(batched) }).toEqual({ seed, state: comparable(oneByOne) });
    }
  });

  it('copies the list it is given, and leaves the list it gives for the next chunk to copy', () => {
    const pending = fold('msg-frozen', [{ type: 'mcp_tool_pending', responses: pendingToolCalls(4) }]).state;
    Object.freeze(pending.blocks);
    const done = (ids: number[], seq: number, state: MessageBlocksState) =>
      apply(
        state,
        {
          type: 'mcp_tool_complete',
          responses: ids.map((id) => ({
            id: `call-${id}`,
            tool: { id: 'web', name: 'builtin_web_search' },
            status: 'done',
            response: [{ url: `https://r/${id}` }],
          })),
        },
        seq,
      );
    const first = done([0, 2], 2, pending);
    expect(pending.blocks.map((block) => block.status)).toEqual(['pending', 'pending', 'pending', 'pending']);
    const shown = first.blocks.map((block) => `${block.type}:${block.toolId ?? block.id}`);
    expect(shown).toEqual([
      'tool:call-0',
      'citation:msg-frozen-b1-call-0-citation',
      'tool:call-1',
      'tool:call-2',
      'citation:msg-frozen-b1-call-2-citation',
      'tool:call-3',
    ]);
    Object.freeze(first.blocks);
    const second = done([1, 3], 3, first);
    expect(first.blocks.map((block) => `${block.type}:${block.toolId ?? block.id}`)).toEqual(shown);
    expect(second.blocks.filter((block) => block.type === 'citation')).toHaveLength(4);
    expect(done([7, 8], 4, second)).toBe(second);
  });

  it('finds a call it opened itself once it has made a map of the list', () => {
    const opened = fold('msg-map', [{ type: 'mcp_tool_pending', responses: pendingToolCalls(12) }]).state;
    const fresh = { id: 'fresh', tool: { id: 'fs-read', name: 'read' }, status: 'pending' };
    const chunk = {
      type: 'mcp_tool_pending',
      // Twelve searches of the list, then a call opened and changed by the same chunk.
      responses: [...pendingToolCalls(12), fresh, { ...fresh, arguments: { path: '/later' } }],
    };
    const blocks = apply(opened, chunk, 2).blocks;
    expect(blocks).toHaveLength(13);
    expect(blocks.at(-1)).toMatchObject({ toolId: 'fresh', arguments: { path: '/later' } });
  });

  it('counts the citations it has added against the limit', () => {
    const search = (id: string, status: string) => ({
      id,
      tool: { id: 'web', name: 'builtin_web_search' },
      status,
      ...(status === 'done' ? { response: [{ url: `https://r/${id}` }] } : {}),
    });
    const nearlyFull = fold('msg-near', [
      { type: 'mcp_tool_pending', responses: [search('a', 'pending'), search('b', 'pending')] },
      { type: 'mcp_tool_pending', responses: pendingToolCalls(MAX_MESSAGE_BLOCKS - 3) },
    ]).state;
    const found = apply(
      nearlyFull,
      { type: 'mcp_tool_complete', responses: [search('a', 'done'), search('b', 'done')] },
      3,
    );
    expect(found.blocks).toHaveLength(MAX_MESSAGE_BLOCKS);
    expect(found.blocks.slice(0, 3).map((block) => block.type)).toEqual(['tool', 'citation', 'tool']);
  });
});
