import { parseChunk } from '../chunks/chunk-schemas.js';
import { decodeChunk, EMPTY_SNAPSHOTS, encodeChunk, type StoredChunk } from '../chunks/snapshot-text.js';
import { compareBlocks, loadBlockVectors } from '../testing/block-vectors.js';
import { evolveBlocks, ignoredReason, initialMessageBlocks, type MessageBlocksState } from './block-rules.js';

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
