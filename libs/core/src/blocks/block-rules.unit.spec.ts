import { parseChunk } from '../chunks/chunk-schemas.js';
import { decodeChunk, EMPTY_SNAPSHOTS, encodeChunk, type StoredChunk } from '../chunks/snapshot-text.js';
import { compareBlocks, loadBlockVectors } from '../testing/block-vectors.js';
import { pendingToolCalls } from '../testing/ignored-chunks.js';
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
